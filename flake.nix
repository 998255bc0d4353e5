# trlstack for Nix users: the contributor toolchain, driven by the same uv.lock as the images.
# This file is an index: each artifact lives in nix/<artifact>.nix, called with callPackage.
{
  description = "trlstack: TRL's training speed-ups on any GPU machine (dev shells, CLI, checks)";

  # CUDA is unfree, so cache.nixos.org holds none of it; these caches do. Nix uses them only for
  # users who trust them (see README).
  nixConfig = {
    extra-substituters = [
      "https://cache.nixos-cuda.org"
      "https://cuda-maintainers.cachix.org"
      "https://nix-community.cachix.org"
    ];
    extra-trusted-public-keys = [
      "cache.nixos-cuda.org:74DUi4Ye579gUqzH4ziL9IyiJBlDpMRn9MBN8oNan9M="
      "cuda-maintainers.cachix.org-1:0dq3bujKpuEPMCX6U4WylrUDZ9JyUG0VpVZa7CNfq5E="
      "nix-community.cachix.org-1:mB9FSh9qf2dCimDSUo8Zy7bkq5CX+/rkCWyvRCYg3Fs="
    ];
  };

  inputs = {
    nixpkgs.url = "github:NixOS/nixpkgs/nixos-unstable";

    pyproject-nix = {
      url = "github:pyproject-nix/pyproject.nix";
      inputs.nixpkgs.follows = "nixpkgs";
    };

    uv2nix = {
      url = "github:pyproject-nix/uv2nix";
      inputs.pyproject-nix.follows = "pyproject-nix";
      inputs.nixpkgs.follows = "nixpkgs";
    };

    pyproject-build-systems = {
      url = "github:pyproject-nix/build-system-pkgs";
      inputs.pyproject-nix.follows = "pyproject-nix";
      inputs.uv2nix.follows = "uv2nix";
      inputs.nixpkgs.follows = "nixpkgs";
    };
  };

  outputs =
    {
      nixpkgs,
      pyproject-nix,
      uv2nix,
      pyproject-build-systems,
      ...
    }:
    let
      inherit (nixpkgs) lib;

      # Where the images and the GPU hosts run.
      systems = [
        "x86_64-linux"
        "aarch64-linux"
      ];

      # pyproject.toml + uv.lock at the repository root: the one lock the images install from.
      workspace = uv2nix.lib.workspace.loadWorkspace { workspaceRoot = ./.; };

      forAllSystems =
        f:
        lib.genAttrs systems (
          system:
          let
            pkgs = nixpkgs.legacyPackages.${system};
            pythonSet = pkgs.callPackage ./nix/python-set.nix {
              inherit workspace pyproject-nix pyproject-build-systems;
            };
          in
          f { inherit system pkgs pythonSet; }
        );
    in
    {
      devShells = forAllSystems (
        {
          system,
          pkgs,
          pythonSet,
        }:
        rec {
          default = pkgs.callPackage ./nix/devshell.nix { inherit workspace pythonSet; };
          cuda =
            let
              # The CUDA toolkit's licence is unfree; only this shell's package set accepts it.
              pkgsCuda = import nixpkgs {
                inherit system;
                config = {
                  allowUnfree = true;
                  cudaSupport = true;
                };
              };
            in
            pkgsCuda.callPackage ./nix/devshell-cuda.nix { devShell = default; };
        }
      );

      packages = forAllSystems (
        {
          pkgs,
          pythonSet,
          ...
        }:
        {
          default = pkgs.callPackage ./nix/package.nix { inherit pyproject-nix pythonSet; };
        }
      );

      checks = forAllSystems (
        {
          pkgs,
          pythonSet,
          ...
        }:
        pkgs.callPackage ./nix/checks.nix {
          inherit pythonSet;
          src = ./.;
        }
      );

      formatter = forAllSystems ({ pkgs, ... }: pkgs.nixfmt-tree);
    };
}
