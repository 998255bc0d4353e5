// Build entry for the trlstack image. From the repository root, `docker/build.sh` sets the variables bake cannot
// compute (hashes, the commit and its time), bakes `sbom`, then the image.
// Every variable below can be set from the environment of the same name (see docker/README.md).

variable "VERSION" { default = "0.1.0" }
variable "IMAGE" { default = "trlstack" }
// Stack versions the labels and the tag announce; the build fails unless uv.lock and the venv agree.
variable "PYTHON_VERSION" { default = "3.13" }
variable "TORCH_VERSION" { default = "2.11.0" }
variable "VLLM_VERSION" { default = "0.25.0" }
variable "TRL_VERSION" { default = "1.16.0" }
variable "TRANSFORMERS_VERSION" { default = "5.17.0" }
variable "CUDA_MAJOR" { default = "13" }
// sha256 of uv.lock (bake cannot read files): the build checks it.
variable "UV_LOCK_SHA256" { default = "" }
// sha256 of the SBOM the `sbom` target writes: the build checks it, the label announces it.
variable "SBOM_SHA256" { default = "" }
// The commit (label org.opencontainers.image.revision) and its time: every date in the image.
variable "GIT_COMMIT" { default = "" }
variable "SOURCE_DATE_EPOCH" { default = "" }
// Base image: Debian trixie slim by digest; an air-gapped host passes a local image of the same release.
variable "BASE_IMAGE" { default = "debian:trixie-slim@sha256:d7e12182ce18b85b93007c1dedf31f2d29e01ccf3182cc4017c709b6259bc132" }
// Private index or PyPI mirror.
variable "UV_INDEX_URL" { default = "https://pypi.org/simple" }
variable "PIP_INDEX_URL" { default = "https://pypi.org/simple" }
// Kernels Hub attention kernels: auto bakes them where the Hub answers (none where it cannot be reached), 1 bakes
// them or fails the build, 0 bakes none. Without docker/kernels/kernels.lock the build locks them first.
variable "WITH_KERNEL_CACHE" { default = "auto" }
// The Hub or a mirror of it the kernels come from (huggingface_hub's variable); empty: https://huggingface.co.
variable "HF_ENDPOINT" { default = "" }
// When the build asks the Hub for the kernels' current commits (no committed lock): part of the kernels stage's
// cache key, so a new value asks again (docker/build.sh sets the time of the build).
variable "KERNELS_ASKED" { default = "" }
// sha256 of the kernels.lock the image holds, empty for none (the lock the `sbom` target writes beside the SBOM):
// the build checks it; set, the label org.trlstack.kernel-cache is 1.
variable "KERNELS_LOCK_SHA256" { default = "" }
// CA bundle for TLS-intercepting proxies and a Hugging Face token file: BuildKit secrets, never in a layer.
variable "CA_BUNDLE" { default = "" }
variable "HF_TOKEN_FILE" { default = "" }

function "minor" {
  params = [version]
  result = regex("^[0-9]+\\.[0-9]+", version)
}

group "default" {
  targets = ["trlstack"]
}

target "_common" {
  context    = "."
  dockerfile = "docker/Dockerfile"
  labels = {
    "org.opencontainers.image.title"       = "trlstack"
    "org.opencontainers.image.description" = "vLLM server and TRL trainers with the locked CUDA stack, one image for both roles"
    "org.opencontainers.image.version"     = VERSION
    "org.opencontainers.image.licenses"    = "Apache-2.0"
    "org.opencontainers.image.base.name"   = BASE_IMAGE
  }
  args = {
    BASE_IMAGE           = BASE_IMAGE
    UV_INDEX_URL         = UV_INDEX_URL
    PIP_INDEX_URL        = PIP_INDEX_URL
    WITH_KERNEL_CACHE    = WITH_KERNEL_CACHE
    HF_ENDPOINT          = HF_ENDPOINT
    KERNELS_ASKED        = KERNELS_ASKED
    KERNELS_LOCK_SHA256  = KERNELS_LOCK_SHA256
    KERNEL_CACHE         = KERNELS_LOCK_SHA256 != "" ? "1" : "0"
    PYTHON_VERSION       = PYTHON_VERSION
    TORCH_VERSION        = TORCH_VERSION
    VLLM_VERSION         = VLLM_VERSION
    TRL_VERSION          = TRL_VERSION
    TRANSFORMERS_VERSION = TRANSFORMERS_VERSION
    UV_LOCK_SHA256       = UV_LOCK_SHA256
    SBOM_SHA256          = SBOM_SHA256
    GIT_COMMIT           = GIT_COMMIT
    SOURCE_DATE_EPOCH    = SOURCE_DATE_EPOCH
  }
  secret = concat(
    CA_BUNDLE != "" ? ["id=ca,src=${CA_BUNDLE}"] : [],
    HF_TOKEN_FILE != "" ? ["id=hf_token,src=${HF_TOKEN_FILE}"] : [],
  )
}

target "trlstack" {
  inherits = ["_common"]
  target   = "runtime"
  tags = [
    "${IMAGE}:${VERSION}-torch${minor(TORCH_VERSION)}-vllm${minor(VLLM_VERSION)}-cu${CUDA_MAJOR}",
    "${IMAGE}:latest",
  ]
}

// The SBOM, written to dist/sbom/sbom.cdx.json (the image holds the same file), with what the kernels stage baked:
// dist/sbom/kernels.txt (one line) and, when it baked kernels, dist/sbom/kernels.lock (the image's lock).
target "sbom" {
  inherits = ["_common"]
  target   = "sbom-file"
  output   = ["type=local,dest=dist/sbom"]
}
