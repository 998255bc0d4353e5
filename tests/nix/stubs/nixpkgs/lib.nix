# The few nixpkgs lib functions that trlstack's Nix files and these stand-ins use, with nixpkgs'
# semantics.
let
  lib = rec {
    inherit (builtins)
      concatMap
      mapAttrs
      filter
      elem
      ;
    genAttrs =
      names: f:
      builtins.listToAttrs (
        map (name: {
          inherit name;
          value = f name;
        }) names
      );
    fix =
      f:
      let
        x = f x;
      in
      x;
    extends =
      overlay: f: final:
      let
        prev = f final;
      in
      prev // overlay final prev;
    composeExtensions =
      f: g: final: prev:
      let
        fApplied = f final prev;
        prev' = prev // fApplied;
      in
      fApplied // g final prev';
    composeManyExtensions = builtins.foldl' composeExtensions (_: _: { });
    unique = builtins.foldl' (acc: x: if elem x acc then acc else acc ++ [ x ]) [ ];
    hasSuffix =
      suffix: s:
      let
        ls = builtins.stringLength s;
        lx = builtins.stringLength suffix;
      in
      ls >= lx && builtins.substring (ls - lx) lx s == suffix;
    # Literal infix test; callers pass strings without regex metacharacters.
    hasInfix = infix: s: builtins.length (builtins.split infix s) > 1;
  };
in
lib
