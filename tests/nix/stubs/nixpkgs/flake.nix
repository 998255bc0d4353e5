# Stand-in for nixpkgs in the offline flake checks (tests/nix): the attributes trlstack's Nix files
# use, as real derivations that are instantiated but never built. It offers more systems than
# trlstack's own on purpose.
{
  outputs =
    { self }:
    {
      lib = import ./lib.nix;
      legacyPackages = self.lib.genAttrs [
        "x86_64-linux"
        "aarch64-linux"
        "x86_64-darwin"
        "aarch64-darwin"
      ] (system: import ./. { inherit system; });
    };
}
