# `import nixpkgs { system; config; }` for the stand-in: a package set where every package is a
# derivation whose builder always fails, so evaluation and instantiation work offline and nothing
# can be built by mistake.
{
  system,
  config ? { },
}:
let
  lib = import ./lib.nix;
  drv =
    name: attrs:
    derivation (
      {
        inherit name system;
        builder = "/bin/sh";
        args = [
          "-c"
          "echo stand-in derivations are not built; exit 1"
        ];
      }
      // attrs
    );
  tool = name: drv name { };
  # Like nixpkgs: an unfree package evaluates, but using it throws unless config allows it.
  unfree =
    name: attrs:
    if config.allowUnfree or false then
      drv name attrs
    else
      throw "Package '${name}' has an unfree license, refusing to evaluate (config.allowUnfree)";
  # The redistributable pieces trlstack uses, as nixpkgs names them; cuda_crt exists from CUDA 13.
  pieces = [
    "cuda_nvcc"
    "cuda_cudart"
    "cuda_cccl"
    "cuda_nvrtc"
    "libcublas"
    "libcurand"
    "libcusolver"
    "libcusparse"
  ];
  newPieces."13.0" = [ "cuda_crt" ];
  cudaSet =
    version:
    let
      names = pieces ++ newPieces.${version} or [ ];
      split = {
        outputs = [
          "out"
          "bin"
          "dev"
          "lib"
        ];
      };
    in
    {
      cudaMajorMinorVersion = version;
      backendStdenv.cc = drv "gcc-wrapper-14.3.0" { };
    }
    // lib.genAttrs names (name: unfree "${name}-${version}" split);
  stdenv = {
    hostPlatform = {
      inherit system;
    };
    mkDerivation =
      args:
      drv (args.name or "${args.pname}-${args.version}") (
        builtins.removeAttrs args [
          "name"
          "passthru"
          "meta"
        ]
      )
      // (args.passthru or { });
  };
  pkgs = {
    inherit
      lib
      system
      config
      stdenv
      ;
    callPackage =
      fn: args:
      let
        f = if builtins.isFunction fn then fn else import fn;
      in
      f (builtins.intersectAttrs (builtins.functionArgs f) pkgs // args);
    # nixpkgs keeps `python` as a removed alias; callPackage hands it to any function asking for it.
    python = throw "'python' has been renamed to/replaced by 'python2'";
    python3 = pkgs.python313;
    python313 =
      let
        self = drv "python3-3.13.9" { };
      in
      self
      // {
        pythonVersion = "3.13";
        version = "3.13.9";
        interpreter = "${self}/bin/python3.13";
      };
    mkShell =
      {
        name ? "nix-shell",
        packages ? [ ],
        inputsFrom ? [ ],
        env ? { },
        shellHook ? "",
        passthru ? { },
      }:
      assert builtins.all (v: builtins.isString v) (builtins.attrValues env);
      drv name (
        {
          nativeBuildInputs =
            packages ++ builtins.concatMap (i: i.nativeBuildInputs or [ ]) inputsFrom;
          shellHook = builtins.concatStringsSep "\n" (
            map (i: i.shellHook or "") inputsFrom ++ [ shellHook ]
          );
        }
        // env
      )
      // passthru;
    runCommand =
      name: env: buildCommand:
      drv name (env // { inherit buildCommand; });
    symlinkJoin =
      { name, paths }:
      drv name { inherit paths; };
    git = tool "git-2.51.0";
    uv = tool "uv-0.11.28";
    docker-client = tool "docker-28.5.1";
    docker-compose = tool "docker-compose-2.40.0";
    nixfmt = tool "nixfmt-1.1.0";
    nixfmt-tree = tool "nixfmt-tree";
    shellcheck = tool "shellcheck-0.11.0";
    # The default CUDA set is older than the one trlstack asks for; tests tell them apart.
    cudaPackages = cudaSet "12.9";
    cudaPackages_13 = cudaSet "13.0";
  };
in
pkgs
