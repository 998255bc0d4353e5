"""`trlstack verify`: prove that an image holds exactly what its commit locks, and print every difference.

Checked against the facts the build stored in /opt/trlstack/provenance (uv.lock, excluded-packages.txt, the
SBOM, slim.sh's manifest):
  - the SBOM names this uv.lock, slim manifest and list of left-out packages (by sha256 and by name), and the
    image's labels name this uv.lock and this SBOM (when checking an image or an archive from outside);
  - every Python distribution in the venv is in the SBOM and every SBOM package is installed, at the locked
    version, from a wheel uv.lock lists with the same sha256, with the RECORD the build recorded for it;
  - every file each RECORD lists has its hash (where two wheels list one path and one needs the other, the
    hash of the one that needs it), except the files slim.sh removed or stripped, which its
    manifest lists with their new hashes; every other file in site-packages is one the SBOM lists (uv's venv
    files), and each .pyc is a hash-checked compilation of its source;
  - the packages excluded-packages.txt leaves out are in uv.lock and not installed;
  - the Debian packages dpkg lists equal the SBOM's;
  - the Kernels Hub cache equals its kernels.lock: every locked kernel at its revision, every build variant
    hashing to the lock's value (the `kernels` library's own check), nothing else.
Exit 0 when all hold, 1 with one line per difference otherwise.

Where: inside a container of the image (`trlstack verify`), on an unpacked file system (`--root DIR`, e.g. a
.sif unpacked with `unsquashfs` or `apptainer build --sandbox`; or run it in the .sif: `apptainer exec
IMAGE.sif trlstack verify`), in a throwaway container of a local image (`--image TAG`), or on a `docker save`
/ OCI archive (`--tarball FILE`, read as a stream, nothing unpacked to disk).

Only the standard library at import time, as in the trlstack modules it builds on (defaults, errors,
options): the image build runs it from the source tree, before trlstack is installed (`python -m
trlstack.commands.verify --only kernels`). The parts: `trees` reads the file system, `parsers` what the lock,
the SBOM and the venv say; `provenance`, `venv`, `debian` and `kernel_cache` check one part each, `areas`
runs the chosen ones, and `command` is the command line."""

from __future__ import annotations

from trlstack.commands.verify.command import add_arguments, main, run

__all__ = ["add_arguments", "main", "run"]
