"""HTTPS for the emulator: a CA, a server certificate for 127.0.0.1/localhost, and client certificates, made
with the ``openssl`` command (no Python package needed), and the server's ``SSLContext``.

The real API server serves TLS and authenticates a client certificate signed by its client CA (``--client-ca-file``)
as the user its common name names; the emulator does the same when given ``client_ca``: a request with such a
certificate needs no token. ``require_client_cert``: the handshake fails without one (a stricter server than
the real one, for tests that must prove a client sent its certificate).
"""

from __future__ import annotations

import shutil
import ssl
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Certificates:
    """PEM files in one directory: the CA, the server's certificate and key, a client's certificate and key."""

    ca_cert: Path
    ca_key: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def _openssl(*args: str) -> None:
    exe = shutil.which("openssl")
    if exe is None:
        raise RuntimeError("the openssl command is needed to make the emulator's certificates")
    subprocess.run([exe, *args], check=True, capture_output=True)


def _signed(directory: Path, name: str, subject: str, ca_cert: Path, ca_key: Path,
            extensions: str) -> tuple[Path, Path]:
    key, csr, cert, ext = (directory / f"{name}.key", directory / f"{name}.csr", directory / f"{name}.crt",
                           directory / f"{name}.ext")
    ext.write_text(extensions)
    _openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", str(key), "-subj", subject, "-out", str(csr))
    _openssl("x509", "-req", "-in", str(csr), "-CA", str(ca_cert), "-CAkey", str(ca_key), "-CAcreateserial",
             "-days", "2", "-sha256", "-extfile", str(ext), "-out", str(cert))
    return cert, key


def make_certificates(directory: Path | str, name: str = "kube-emulator") -> Certificates:
    """A fresh CA in ``directory`` and, signed by it, a server certificate (127.0.0.1, localhost) and a client
    certificate (common name ``kubetrain-test``, organisation ``system:masters``, as a kubeadm admin's)."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    ca_key, ca_cert = d / "ca.key", d / "ca.crt"
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", str(ca_key), "-out", str(ca_cert), "-days", "2", "-subj", f"/CN={name}-ca",
             "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    server_cert, server_key = _signed(
        d, "server", f"/CN={name}", ca_cert, ca_key,
        "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n",
    )
    client_cert, client_key = _signed(
        d, "client", "/O=system:masters/CN=kubetrain-test", ca_cert, ca_key,
        "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n",
    )
    return Certificates(ca_cert, ca_key, server_cert, server_key, client_cert, client_key)


def server_context(certs: Certificates, *, client_ca: bool = True, require_client_cert: bool = False) -> ssl.SSLContext:
    """The server side: its certificate; with ``client_ca``, client certificates signed by the CA are asked for
    (optional, as the API server asks) and verified."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(certs.server_cert), str(certs.server_key))
    if client_ca or require_client_cert:
        ctx.load_verify_locations(cafile=str(certs.ca_cert))
        ctx.verify_mode = ssl.CERT_REQUIRED if require_client_cert else ssl.CERT_OPTIONAL
    return ctx


__all__ = ["Certificates", "make_certificates", "server_context"]
