# Stand-in for pyproject.nix in the offline flake checks (tests/nix): `build.packages` (a Python
# package set with overrideScope and mkVirtualEnv) and `build.util.mkApplication`. mkVirtualEnv
# resolves the dependency closure from the locked metadata that the uv2nix stand-in puts on each
# package, and records which wheels it could install.
{
  inputs.nixpkgs.url = "github:NixOS/nixpkgs/nixos-unstable";

  outputs =
    { nixpkgs, ... }:
    let
      inherit (nixpkgs) lib;
    in
    {
      build.packages =
        { stdenv, python }:
        let
          inherit (stdenv.hostPlatform) system;
          arch = builtins.head (builtins.split "-" system);
          wheelName = wheel: baseNameOf wheel.url;
          # Wheels this interpreter can install here: pure Python, or CPython 3.13, abi3 or py3
          # builds for Linux on this architecture.
          tags = [
            "-cp313-"
            "-abi3-"
            "-py3-none-"
          ];
          fits =
            name:
            lib.hasSuffix "-none-any.whl" name
            || (
              builtins.any (tag: lib.hasInfix tag name) tags
              && lib.hasInfix "linux" name
              && lib.hasInfix arch name
            );
          # Locked requirements of `name[extras]`, or of a project with its dependency groups.
          requirements =
            set: item:
            let
              entry = set.${item.name}.lockEntry;
              pick = table: builtins.concatMap (x: table.${x} or [ ]) item.extras;
            in
            (entry.dependencies or [ ])
            ++ pick (entry.optional-dependencies or { })
            ++ pick (entry.dev-dependencies or { });
          closure =
            set: spec:
            let
              node = name: extras: {
                key = "${name}[${builtins.concatStringsSep "," extras}]";
                inherit name extras;
              };
              next = item: map (dep: node dep.name (dep.extra or [ ])) (requirements set item);
            in
            lib.unique (
              map (item: item.name) (
                builtins.genericClosure {
                  startSet = builtins.attrValues (lib.mapAttrs node spec);
                  operator = next;
                }
              )
            );
          base = final: {
            inherit python stdenv;
            mkVirtualEnv =
              name: spec:
              let
                names = closure final spec;
                external = builtins.filter (n: !(final.${n}.lockEntry.source ? editable)) names;
                wheelsOf = n: map wheelName (final.${n}.lockEntry.wheels or [ ]);
                editable = builtins.filter (n: final.${n}.editableRoot != null) names;
              in
              derivation {
                inherit name system;
                builder = "/bin/sh";
                packages = builtins.concatStringsSep " " names;
              }
              // {
                inherit spec;
                packageNames = names;
                # Which sources the overlays in this set chose (uv2nix, pyproject-build-systems).
                sourcePreferences = {
                  packages = final.workspaceSourcePreference or null;
                  buildSystems = final.buildSystemsPreference or null;
                };
                wheels = lib.genAttrs external (n: builtins.filter fits (wheelsOf n));
                editable = lib.genAttrs editable (n: final.${n}.editableRoot);
              };
          };
          makeSet =
            overlay:
            lib.fix (lib.extends overlay base)
            // {
              overrideScope = more: makeSet (lib.composeExtensions overlay more);
            };
        in
        makeSet (_: _: { });

      build.util =
        { stdenv }:
        {
          mkApplication =
            { venv, package }:
            stdenv.mkDerivation {
              inherit (package) pname version;
              inherit venv;
              passthru = {
                inherit venv package;
              };
            };
        };
    };
}
