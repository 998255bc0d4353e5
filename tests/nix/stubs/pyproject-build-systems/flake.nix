# Stand-in for pyproject-build-systems in the offline flake checks (tests/nix): its overlays, each
# recording which source preference the build backends were taken with.
{
  inputs = {
    nixpkgs.url = "github:NixOS/nixpkgs/nixos-unstable";
    pyproject-nix.url = "github:pyproject-nix/pyproject.nix";
    uv2nix.url = "github:pyproject-nix/uv2nix";
  };

  outputs =
    { self, ... }:
    {
      overlays = {
        wheel = _: _: { buildSystemsPreference = "wheel"; };
        sdist = _: _: { buildSystemsPreference = "sdist"; };
        default = self.overlays.sdist;
      };
    };
}
