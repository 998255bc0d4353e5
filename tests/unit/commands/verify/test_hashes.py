"""trlstack.commands.verify.hashes: hashes spelled as each source spells them."""

from __future__ import annotations

import hashlib

from trlstack.commands.verify.hashes import record_hash


def test_record_hash_spelling() -> None:
    assert (
        record_hash(hashlib.sha256(b"").hexdigest()) == "sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU"
    )
