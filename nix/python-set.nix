# Every package of uv.lock as a Nix derivation, on the CPython minor version the images run
# (Debian trixie's 3.13). Wheels are preferred, as uv installs them in the images; build backends
# come from pyproject-build-systems.
{
  lib,
  callPackage,
  python313,
  workspace,
  pyproject-nix,
  pyproject-build-systems,
  # Not `python`: callPackage would fill that from nixpkgs, where it is a removed alias.
  interpreter ? python313,
  sourcePreference ? "wheel",
}:
(callPackage pyproject-nix.build.packages { python = interpreter; }).overrideScope (
  lib.composeManyExtensions [
    pyproject-build-systems.overlays.wheel
    (workspace.mkPyprojectOverlay { inherit sourcePreference; })
  ]
)
