# `nix build` / `nix run`: the trlstack CLI (plan, doctor, version) on the locked light dependency
# set, as an application: its commands are on PATH, the virtualenv's interpreter and activation
# scripts are not. serve-vllm and train come along; they run where vLLM and accelerate are
# installed (the images).
{
  callPackage,
  pyproject-nix,
  pythonSet,
  dependencies ? {
    trlstack = [ ];
  },
}:
let
  inherit (callPackage pyproject-nix.build.util { }) mkApplication;
in
mkApplication {
  venv = pythonSet.mkVirtualEnv "trlstack-env" dependencies;
  package = pythonSet.trlstack;
}
