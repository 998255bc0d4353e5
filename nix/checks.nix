# `nix flake check`: the light unit tests on the locked light set plus the dev group, Python style
# (ruff, configured in pyproject.toml) and Nix style (nixfmt). Each runs in a writable copy of the
# source tree.
{
  runCommand,
  nixfmt,
  pythonSet,
  src,
  dependencies ? {
    trlstack = [ "dev" ];
  },
}:
let
  venv = pythonSet.mkVirtualEnv "trlstack-check-env" dependencies;
  inTree =
    name: tools: script:
    runCommand "trlstack-${name}" { nativeBuildInputs = tools; } ''
      cp -r --no-preserve=mode ${src} tree
      cd tree
      export HOME=$TMPDIR
      ${script}
      touch $out
    '';
in
{
  unit-tests = inTree "unit-tests" [ venv ] "pytest -p no:cacheprovider tests/unit";
  ruff = inTree "ruff" [ venv ] ''
    ruff check --no-cache .
    ruff format --check --no-cache .
  '';
  nixfmt = inTree "nixfmt" [ nixfmt ] "find . -name '*.nix' -exec nixfmt --check {} +";
}
