"""A throwaway certificate authority and a server certificate for the bench's HTTPS target.

``punctual bench burst --target-tls`` serves the no-op target over TLS with a certificate for its
name, signed by a CA made for the run; the worker processes trust that CA alone through
``SSL_CERT_FILE`` (which the worker's TLS context honours: ``httpx.create_ssl_context``), so they
verify the chain and the name exactly as they would a real webhook's. Nothing is installed in the
system's trust store, and the files live in the target's temporary directory.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


@dataclass(frozen=True)
class ServerFiles:
    ca: Path  # the CA certificate (PEM): what clients trust
    certificate: Path  # the server's chain (PEM)
    key: Path  # the server's private key (PEM, unencrypted)


def throwaway(folder: Path, host: str) -> ServerFiles:
    """Write a CA and a certificate for ``host`` (a name or an address) valid for a day into ``folder``."""
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "punctual bench CA")])
    ca = (
        _builder(ca_name, ca_name, ca_key)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = (
        _builder(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)]), ca_name, key)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName([_alt_name(host)]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    files = ServerFiles(folder / "ca.pem", folder / "server.pem", folder / "server.key")
    files.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    files.certificate.write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    files.key.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return files


def _builder(subject: x509.Name, issuer: x509.Name, key: ec.EllipticCurvePrivateKey) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
    )


def _alt_name(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)
