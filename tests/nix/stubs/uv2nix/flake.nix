# Stand-in for uv2nix in the offline flake checks (tests/nix). `lib.workspace.loadWorkspace` really
# reads the workspace's pyproject.toml and uv.lock (builtins.fromTOML), checks the interpreter
# against the lock's requires-python as uv2nix does, and turns every locked package into a
# package-set entry carrying its lock metadata. Markers are not evaluated, so a resolved closure
# is a superset of the real one.
{
  inputs = {
    nixpkgs.url = "github:NixOS/nixpkgs/nixos-unstable";
    pyproject-nix.url = "github:pyproject-nix/pyproject.nix";
  };

  outputs =
    { nixpkgs, ... }:
    let
      inherit (nixpkgs) lib;
      # ">=3.11, <3.14" against "3.13.9".
      satisfies =
        constraint: version:
        builtins.all (
          clause:
          let
            m = builtins.match " *(>=|<=|==|!=|<|>) *([0-9.*]+) *" clause;
            op = builtins.elemAt m 0;
            c = builtins.compareVersions version (builtins.elemAt m 1);
          in
          assert m != null;
          {
            ">=" = c >= 0;
            "<=" = c <= 0;
            "<" = c < 0;
            ">" = c > 0;
            "==" = c == 0;
            "!=" = c != 0;
          }
          .${op}
        ) (lib.filter builtins.isString (builtins.split "," constraint));
    in
    {
      lib.workspace.loadWorkspace =
        { workspaceRoot }:
        let
          pyproject = builtins.fromTOML (builtins.readFile (workspaceRoot + "/pyproject.toml"));
          uvLock = builtins.fromTOML (builtins.readFile (workspaceRoot + "/uv.lock"));
          # The first entry wins where the lock forks a name by marker.
          locked = builtins.listToAttrs (
            map (p: {
              inherit (p) name;
              value = p;
            }) uvLock.package
          );
          project = pyproject.project.name;
          mkPackage =
            system: entry: args:
            derivation {
              name = "${entry.name}-${entry.version or "0"}";
              inherit system;
              builder = "/bin/sh";
            }
            // {
              pname = entry.name;
              version = entry.version or "0";
              lockEntry = entry;
              editableRoot = null;
              override = more: mkPackage system entry (args // more);
            }
            // args;
          accepts =
            python:
            satisfies uvLock.requires-python python.version
            || throw "Python ${python.version} does not satisfy uv.lock's requires-python";
        in
        {
          inherit workspaceRoot;
          deps = {
            default.${project} = pyproject.tool.uv.default-groups or [ ];
            all.${project} =
              builtins.attrNames (pyproject.project.optional-dependencies or { })
              ++ builtins.attrNames (pyproject.dependency-groups or { });
          };
          mkPyprojectOverlay =
            { sourcePreference }:
            _final: prev:
            assert lib.elem sourcePreference [
              "wheel"
              "sdist"
            ];
            assert accepts prev.python;
            lib.mapAttrs (_: entry: mkPackage prev.python.system entry { }) locked
            // {
              workspaceSourcePreference = sourcePreference;
            };
          mkEditablePyprojectOverlay =
            { root }:
            _final: prev: {
              ${project} = prev.${project}.override { editableRoot = root; };
            };
        };
    };
}
