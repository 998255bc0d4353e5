# `nix develop .#cuda`: the default shell plus a CUDA 13 toolchain for building kernels: nvcc,
# CUDA_HOME with the headers and libraries extensions link against, and the host compiler this
# CUDA release supports first on PATH.
# The driver comes from the host, as in the default shell (see README).
{
  lib,
  mkShell,
  symlinkJoin,
  cudaPackages_13,
  devShell,
  # The toolkit pieces merged into CUDA_HOME, by their cudaPackages names (cuda_crt: the crt/
  # headers nvcc needs, a separate piece since CUDA 13).
  components ? [
    "cuda_nvcc"
    "cuda_crt"
    "cuda_cudart"
    "cuda_cccl"
    "cuda_nvrtc"
    "libcublas"
    "libcurand"
    "libcusolver"
    "libcusparse"
  ],
}:
let
  cudaPackages = cudaPackages_13;
  # nixpkgs splits each piece into outputs (bin, dev, lib, ...); CUDA_HOME users expect one tree.
  allOutputs = p: map (output: p.${output}) (p.outputs or [ "out" ]);
  cudaHome = symlinkJoin {
    name = "cuda-home-${cudaPackages.cudaMajorMinorVersion}";
    paths = lib.concatMap (name: allOutputs cudaPackages.${name}) components;
  };
  # The newest GCC this CUDA release accepts; nixpkgs' default compiler may be newer.
  hostCompiler = cudaPackages.backendStdenv.cc;
in
mkShell {
  name = "trlstack-cuda";
  inputsFrom = [ devShell ];
  packages = [ cudaHome ];
  env = devShell.shellEnv // {
    CUDA_HOME = "${cudaHome}";
    CUDA_PATH = "${cudaHome}";
    NVCC_CCBIN = "${hostCompiler}/bin/c++";
    CUDAHOSTCXX = "${hostCompiler}/bin/c++";
  };
  # Runs after the default shell's hook (inputsFrom), so this compiler comes first.
  shellHook = ''
    export PATH=${hostCompiler}/bin:$PATH
  '';
  passthru = {
    inherit cudaHome hostCompiler;
    inherit (cudaPackages) cudaMajorMinorVersion;
  };
}
