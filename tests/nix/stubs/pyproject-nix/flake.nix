# Stand-in for pyproject.nix in the offline flake checks (tests/nix): `build.packages` (a Python package set with
# overrideScope and mkVirtualEnv) and `build.util.mkApplication`. mkVirtualEnv resolves the dependency closure
# from the locked metadata that the uv2nix stand-in puts on each package, and records which wheels it would use.
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
          # Wheels this interpreter and platform can install: pure Python, or CPython 3.13 / abi3 / py3 for Linux on arch.
          fits =
            name:
            lib.hasSuffix "-none-any.whl" name
            || (
              (lib.hasInfix "-cp313-" name || lib.hasInfix "-abi3-" name || lib.hasInfix "-py3-none-" name)
              && lib.hasInfix "linux" name
              && lib.hasInfix arch name
            );
          # Locked dependencies of one requirement `name[extras]`, or of a project with its groups.
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
            in
            lib.unique (
              map (item: item.name) (
                builtins.genericClosure {
                  startSet = builtins.attrValues (lib.mapAttrs node spec);
                  operator = item: map (dep: node dep.name (dep.extra or [ ])) (requirements set item);
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
              in
              derivation {
                inherit name system;
                builder = "/bin/sh";
                packages = builtins.concatStringsSep " " names;
              }
              // {
                inherit spec;
                packageNames = names;
                # Which sources the overlays in this set chose (uv2nix and pyproject-build-systems stand-ins).
                sourcePreferences = {
                  packages = final.workspaceSourcePreference or null;
                  buildSystems = final.buildSystemsPreference or null;
                };
                wheels = lib.genAttrs external (
                  n: builtins.filter fits (map wheelName (final.${n}.lockEntry.wheels or [ ]))
                );
                editable = lib.genAttrs (builtins.filter (n: final.${n}.editableRoot != null) names) (
                  n: final.${n}.editableRoot
                );
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
              venv = venv;
              passthru = { inherit venv package; };
            };
        };
    };
}
