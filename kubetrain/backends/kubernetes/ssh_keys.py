"""A job's ssh key pair: Ed25519, made when the job is submitted, in OpenSSH's own file formats.

An MPI job's launcher reaches its worker pods over ssh (docs/render.md, "MPI over ssh"). The render writes
the job's Secret without its keys (rendering is a pure function of the job, and keys printed by `render`
or a dry run would leak); `fill_ssh_secrets` puts a fresh pair into it just before it is created, so the
private key only ever travels to the API server. One pair serves as the users' key, the workers' host key
(so the launcher pins it in `known_hosts` instead of trusting any host) and the authorized key.

Key generation is the standard library's: RFC 8032's key derivation (SHA-512 of 32 random bytes, clamped,
times the base point) and OpenSSH's `openssh-key-v1` format (its PROTOCOL.key). Only the public key is
computed here; signing is OpenSSH's, in the pods. The tests hold the derivation to RFC 8032's test vectors
and the files to `ssh-keygen -y` and a real sshd.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import secrets
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...contract.labels import SSH_KEYS_ANNOTATION

PRIVATE_KEY = "ssh-privatekey"
"""The Secret key of the private key: `kubernetes.io/ssh-auth`'s required key (the MPI Operator's too)."""
PUBLIC_KEY = "ssh-publickey"
"""The public key, one `authorized_keys` line (the MPI Operator's key name)."""
KNOWN_HOSTS = "known_hosts"
"""`* <public key>`: every worker's host key is the job's key, so the launcher checks it."""
SECRET_TYPE = "kubernetes.io/ssh-auth"

_KEY_TYPE = b"ssh-ed25519"

# Curve25519 in twisted Edwards form (RFC 8032, section 5.1).
_P = 2**255 - 19
_D = -121665 * pow(121666, _P - 2, _P) % _P
_BASE_Y = 4 * pow(5, _P - 2, _P) % _P


def _recover_x(y: int) -> int:
    """The even x of the curve point with this y (the base point's, RFC 8032 5.1.3)."""
    xx = (y * y - 1) * pow(_D * y * y + 1, _P - 2, _P)
    x = pow(xx, (_P + 3) // 8, _P)
    if (x * x - xx) % _P != 0:
        x = x * pow(2, (_P - 1) // 4, _P) % _P
    return _P - x if x & 1 else x


_BASE = (_recover_x(_BASE_Y), _BASE_Y, 1, _recover_x(_BASE_Y) * _BASE_Y % _P)
"""The base point in extended coordinates (X, Y, Z, T)."""

Point = tuple[int, int, int, int]


def _add(a: Point, b: Point) -> Point:
    """Point addition in extended coordinates (RFC 8032 5.1.4); also doubles (a == b)."""
    x1, y1, z1, t1 = a
    x2, y2, z2, t2 = b
    aa = (y1 - x1) * (y2 - x2) % _P
    bb = (y1 + x1) * (y2 + x2) % _P
    cc = 2 * t1 * t2 * _D % _P
    dd = 2 * z1 * z2 % _P
    e, f, g, h = bb - aa, dd - cc, dd + cc, bb + aa
    return e * f % _P, g * h % _P, f * g % _P, e * h % _P


def _multiply(scalar: int, point: Point) -> Point:
    out: Point = (0, 1, 1, 0)  # the neutral element
    while scalar:
        if scalar & 1:
            out = _add(out, point)
        point = _add(point, point)
        scalar >>= 1
    return out


def public_key(seed: bytes) -> bytes:
    """The 32-byte Ed25519 public key of a 32-byte private key (RFC 8032 5.1.5)."""
    if len(seed) != 32:
        raise ValueError("an Ed25519 private key is 32 bytes")
    digest = hashlib.sha512(seed).digest()
    scalar = int.from_bytes(digest[:32], "little")
    scalar &= (1 << 254) - 8
    scalar |= 1 << 254
    x, y, z, _ = _multiply(scalar, _BASE)
    z_inv = pow(z, _P - 2, _P)
    x, y = x * z_inv % _P, y * z_inv % _P
    return (y | ((x & 1) << 255)).to_bytes(32, "little")


def _string(data: bytes) -> bytes:
    """SSH wire format's `string`: a 32-bit length, then the bytes."""
    return struct.pack(">I", len(data)) + data


@dataclass(frozen=True)
class KeyPair:
    """An Ed25519 key pair as OpenSSH writes it. Its repr hides the private key."""

    private: str
    """`-----BEGIN OPENSSH PRIVATE KEY-----` ... (unencrypted: it lives in a Secret)."""
    public: str
    """`ssh-ed25519 AAAA... comment` and a newline."""

    def __repr__(self) -> str:
        return f"KeyPair(public={self.public.strip()!r}, private=<hidden>)"


def key_pair(comment: str, seed: bytes | None = None) -> KeyPair:
    """A new key pair (`seed`: its 32-byte private key, random unless given, for tests)."""
    seed = secrets.token_bytes(32) if seed is None else seed
    public = public_key(seed)
    blob = _string(_KEY_TYPE) + _string(public)
    check = secrets.token_bytes(4)
    private = (check + check + _string(_KEY_TYPE) + _string(public) + _string(seed + public)
               + _string(comment.encode()))
    private += bytes(range(1, 1 + (-len(private) % 8)))  # padding to the "none" cipher's block size, 8
    body = (b"openssh-key-v1\0" + _string(b"none") + _string(b"none") + _string(b"") + struct.pack(">I", 1)
            + _string(blob) + _string(private))
    text = base64.b64encode(body).decode()
    lines = [text[i:i + 70] for i in range(0, len(text), 70)]
    pem = "-----BEGIN OPENSSH PRIVATE KEY-----\n" + "\n".join(lines) + "\n-----END OPENSSH PRIVATE KEY-----\n"
    return KeyPair(pem, f"{_KEY_TYPE.decode()} {base64.b64encode(blob).decode()} {comment}\n")


def secret_data(pair: KeyPair) -> dict[str, str]:
    """The Secret's `data` (base64, as the API takes it)."""
    public_line = pair.public.strip()
    plain = {PRIVATE_KEY: pair.private, PUBLIC_KEY: pair.public, KNOWN_HOSTS: f"* {public_line}\n"}
    return {key: base64.b64encode(value.encode()).decode() for key, value in plain.items()}


def needs_keys(obj: dict[str, Any]) -> bool:
    """A Secret the render left for the submitter to fill with a new key pair (and not filled yet)."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    return obj.get("kind") == "Secret" and SSH_KEYS_ANNOTATION in annotations and not obj.get("data")


def fill_ssh_secrets(objects: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Copies of `objects` with a new key pair in each Secret the render left empty for one: what is
    submitted (or sent in a server-side dry run), never what is printed."""
    out = []
    for obj in objects:
        if needs_keys(obj):
            obj = copy.deepcopy(obj)
            obj["data"] = secret_data(key_pair(f"kubetrain-{obj['metadata']['name']}"))
        out.append(obj)
    return out


__all__ = [
    "KNOWN_HOSTS",
    "PRIVATE_KEY",
    "PUBLIC_KEY",
    "SECRET_TYPE",
    "KeyPair",
    "fill_ssh_secrets",
    "key_pair",
    "needs_keys",
    "public_key",
    "secret_data",
]
