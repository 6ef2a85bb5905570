"""Encrypting workflow payloads: an AES-256-GCM payload codec and the key file it reads.

Incident histories name devices, nodes, pods and driver messages; with a key configured
(``PODMEDIC_PAYLOAD_KEY_FILE``) every payload reaches the Temporal server encrypted, and
only clients holding the key (the worker, ingest, the CLI, ``podmedic codec-server`` for the
UI) can read them. Keys rotate by adding the new key first in the file: payloads are written
with the first key and read with whichever key id they name.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from collections.abc import Sequence
from pathlib import Path

from temporalio.api.common.v1 import Payload
from temporalio.converter import PayloadCodec

ENCODING = b"binary/encrypted"
KEY_ID = "encryption-key-id"
NONCE_BYTES = 12


class CodecKeyError(ValueError):
    """A key file that cannot be used; the message says which file, which line and why."""


def load_keys(path: Path) -> list[bytes]:
    """Keys from ``path``: one base64 32-byte key per line, newest first; ``#`` starts a comment."""
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise CodecKeyError(f"payload key file {path}: cannot read: {exc.strerror}") from exc
    keys = []
    for number, line in enumerate(lines, 1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        try:
            key = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise CodecKeyError(f"payload key file {path}, line {number}: not base64 ({exc})") from exc
        if len(key) != 32:
            raise CodecKeyError(f"payload key file {path}, line {number}: key is {len(key)} bytes, "
                                "AES-256 needs 32 (make one: head -c 32 /dev/urandom | base64)")
        keys.append(key)
    if not keys:
        raise CodecKeyError(f"payload key file {path}: no key in it")
    return keys


def key_id(key: bytes) -> str:
    """A short public name for a key (its hash), stored with each payload."""
    return hashlib.sha256(key).hexdigest()[:16]


class EncryptionCodec(PayloadCodec):
    """AES-256-GCM over whole payloads; the payload's metadata names the key it was sealed with."""

    def __init__(self, keys: Sequence[bytes]) -> None:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        if not keys:
            raise CodecKeyError("EncryptionCodec needs at least one key")
        self._write_id = key_id(keys[0])
        self._ciphers = {key_id(k): AESGCM(k) for k in keys}

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        """Seal each payload with the newest key."""
        cipher = self._ciphers[self._write_id]
        sealed = []
        for payload in payloads:
            nonce = os.urandom(NONCE_BYTES)
            data = nonce + cipher.encrypt(nonce, payload.SerializeToString(), None)
            sealed.append(Payload(metadata={"encoding": ENCODING, KEY_ID: self._write_id.encode()}, data=data))
        return sealed

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        """Open sealed payloads; others (written before encryption was on) pass unchanged."""
        opened = []
        for payload in payloads:
            if payload.metadata.get("encoding") != ENCODING:
                opened.append(payload)
                continue
            name = payload.metadata.get(KEY_ID, b"").decode()
            cipher = self._ciphers.get(name)
            if cipher is None:
                raise ValueError(f"payload sealed with key {name!r}, which is not in the key file "
                                 f"(known: {', '.join(self._ciphers)})")
            plain = cipher.decrypt(payload.data[:NONCE_BYTES], payload.data[NONCE_BYTES:], None)
            opened.append(Payload.FromString(plain))
        return opened
