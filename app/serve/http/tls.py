"""This machine's TLS certificate for `cove serve` off loopback: an ECDSA P-256 key and a
self-signed certificate naming the addresses the server answers, made once in Cove's private
folder (Paths.tls_dir), made again when it nears its end or does not name the address asked,
and its SHA-256 fingerprint, which is what a person compares to know they reached this machine.

The fingerprint is the SHA-256 of the certificate's DER bytes in upper-case hex pairs joined by
colons, as `openssl x509 -noout -fingerprint -sha256 -in cert.pem` prints it."""

from __future__ import annotations

import hashlib
import ipaddress
import os
import socket
import ssl
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from app.atomic_file import locked, write_bytes_whole
from app.private_files import make_private
from app.serve.http.http import LOOPBACK_NAMES
from app.set_aside import aside_name, utc_stamp

CERT_FILE = "cert.pem"
KEY_FILE = "key.pem"
VALID_DAYS = 365
RENEW_DAYS = 30  # a certificate that ends within this many days is made again
CLOCK_SKEW = timedelta(hours=1)  # valid from an hour ago: a client whose clock is a little behind still accepts it

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class TlsUnavailable(Exception):
    """The certificate cannot be made, stored or loaded; the message is a sentence."""


@dataclass(frozen=True)
class MachineCertificate:
    cert_file: Path
    key_file: Path
    fingerprint: str  # SHA-256 of the DER certificate, upper-case hex pairs joined by colons
    not_after: datetime
    dns_names: tuple[str, ...]
    ip_addresses: tuple[str, ...]
    notices: tuple[str, ...] = ()  # sentences for the person: made, made again (and why), a file set aside

    def covers(self, host: str) -> bool:
        """Whether a client asking for `host` finds it among the certificate's names."""
        ip = _ip(host)
        if ip is not None:
            return str(ip) in self.ip_addresses
        return host.lower().rstrip(".") in self.dns_names


def is_loopback(host: str) -> bool:
    """Whether `cove serve --host host` stays on this machine (plain HTTP, as ever): 127.0.0.1, ::1
    and localhost only; every other address, 127.0.0.2 and 0.0.0.0 included, is served with TLS."""
    return host in LOOPBACK_NAMES


def fingerprint(cert: x509.Certificate) -> str:
    """SHA-256 of the certificate's DER bytes: `AB:CD:…` (32 pairs), as openssl prints it."""
    digest = hashlib.sha256(cert.public_bytes(serialization.Encoding.DER)).hexdigest().upper()
    return ":".join(digest[i : i + 2] for i in range(0, len(digest), 2))


def machine_certificate(folder: Path, host: str, *, now: datetime | None = None, valid_days: int = VALID_DAYS) -> MachineCertificate:
    """The certificate to serve `host` with, from `folder` (made 0700): the one there when it is
    sound, names `host` and stays valid more than RENEW_DAYS; else a new one (the key kept when it
    is sound), naming `host`, the machine's names and whatever the old one named. A file that
    cannot be read as a key or a certificate is moved aside, never deleted. TlsUnavailable with a
    sentence when the folder or its files cannot be made."""
    now = now or datetime.now(UTC)
    try:
        make_private((folder,))
        with locked(folder / ".lock"):
            return _certificate(folder, host, now, valid_days)
    except OSError as exc:
        raise TlsUnavailable(f"the certificate could not be stored in {folder}: {exc.strerror or exc}") from None


def server_context(cert: MachineCertificate) -> ssl.SSLContext:
    """A server-side TLS context with `cert` (TLS 1.2 at least); TlsUnavailable when the files do not load."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert.cert_file, cert.key_file)
    except (OSError, ssl.SSLError) as exc:
        raise TlsUnavailable(f"the certificate in {cert.cert_file.parent} could not be loaded: {exc}") from None
    return context


def serving_context(folder: Path, host: str) -> tuple[ssl.SSLContext, MachineCertificate]:
    """What a server listening on `host` off loopback serves with, as `cove serve --host` and the
    window's "other machines" switch do: the machine's certificate for `host` (made or renewed as
    needed) and its TLS context. TlsUnavailable with a sentence."""
    cert = machine_certificate(folder, host)
    return server_context(cert), cert


def hosts_for_others(cert: MachineCertificate) -> list[str]:
    """What another machine types to reach a server on every address with `cert`: this machine's
    network IPv4 addresses now, then its name (NAME.local where the certificate names it), each
    only when the certificate names it (a client checks that it does)."""
    hosts = [a for a in _interface_addresses() if "." in a and not _is_loopback_ip(a)]
    machine = _machine_name()
    if machine:
        hosts += [f"{machine}.local", machine] if "." not in machine else [machine]
    return [h for h in _union(hosts, []) if cert.covers(h)]


def _is_loopback_ip(address: str) -> bool:
    ip = _ip(address)
    return ip is not None and ip.is_loopback


def _certificate(folder: Path, host: str, now: datetime, valid_days: int) -> MachineCertificate:
    cert_path, key_path = folder / CERT_FILE, folder / KEY_FILE
    notices: list[str] = []
    key = _read_key(key_path, notices)
    cert = _read_cert(cert_path, notices)
    reason = _why_new(cert, key, host, now)
    if key is not None and reason is None and cert is not None:
        if key_path.stat().st_mode & 0o077:
            os.chmod(key_path, 0o600)
        return _described(cert, cert_path, key_path, tuple(notices))
    if key is None:
        key = ec.generate_private_key(ec.SECP256R1())
        pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
        write_bytes_whole(key_path, pem)
    # The old certificate's names are kept, so serving on one address and then another does not
    # make a new certificate (and a new fingerprint) each time.
    dns, ips = _names(host)
    if cert is not None:
        old_dns, old_ips = _sans(cert)
        dns, ips = _union(dns, old_dns), _union(ips, old_ips)
    made = _make_cert(key, dns, ips, now, valid_days)
    write_bytes_whole(cert_path, made.public_bytes(serialization.Encoding.PEM))
    until = f"{made.not_valid_after_utc:%Y-%m-%d}"
    if cert is None and not notices:
        notices.append(f"Made this machine's certificate for HTTPS (valid until {until}), in {folder}.")
    else:
        notices.append(
            f"Made a new certificate for HTTPS ({reason or 'the old one was unreadable'}; valid until {until}): "
            "its fingerprint changed, so clients that trusted the old one must trust this one."
        )
    return _described(made, cert_path, key_path, tuple(notices))


def _why_new(cert: x509.Certificate | None, key: ec.EllipticCurvePrivateKey | None, host: str, now: datetime) -> str | None:
    """Why the certificate must be made again (a sentence's clause), or None when it serves."""
    if cert is None or key is None:
        return "its key was missing or unreadable" if cert is not None else None
    if cert.public_key() != key.public_key():
        return "the certificate did not belong to the key"
    end = cert.not_valid_after_utc
    if end - now < timedelta(days=RENEW_DAYS):
        return f"the old one {'ended' if end <= now else 'ends'} on {end:%Y-%m-%d}"
    if cert.not_valid_before_utc > now:
        return "the old one starts in the future (this machine's clock went back)"
    needed_dns, needed_ips = _needed(host)
    have_dns, have_ips = _sans(cert)
    missing = [n for n in needed_dns if n not in have_dns] + [a for a in needed_ips if a not in have_ips]
    if missing:
        return f"the old one did not name {', '.join(missing)}"
    return None


def _read_key(path: Path, notices: list[str]) -> ec.EllipticCurvePrivateKey | None:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm):
        key = None
    if isinstance(key, ec.EllipticCurvePrivateKey):
        return key
    notices.append(f"The certificate's key {path} could not be read; it was moved to {_set_aside(path)} and a new key made.")
    return None


def _read_cert(path: Path, notices: list[str]) -> x509.Certificate | None:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        return x509.load_pem_x509_certificate(data)
    except ValueError:
        notices.append(f"The certificate {path} could not be read; it was moved to {_set_aside(path)}.")
        return None


def _set_aside(path: Path) -> Path:
    target = aside_name(path, utc_stamp())
    path.replace(target)
    return target


def _make_cert(key: ec.EllipticCurvePrivateKey, dns: list[str], ips: list[str], now: datetime, valid_days: int) -> x509.Certificate:
    title = f"Cove on {_machine_name() or 'this machine'}"[:64]  # a common name holds at most 64 characters
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, title)])
    public = key.public_key()
    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in dns]
    sans += [x509.IPAddress(ipaddress.ip_address(a)) for a in ips]
    return (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - CLOCK_SKEW)
        .not_valid_after(now + timedelta(days=valid_days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(public), critical=False)
        .sign(key, hashes.SHA256())
    )


def _described(cert: x509.Certificate, cert_path: Path, key_path: Path, notices: tuple[str, ...]) -> MachineCertificate:
    dns, ips = _sans(cert)
    return MachineCertificate(cert_path, key_path, fingerprint(cert), cert.not_valid_after_utc, tuple(dns), tuple(ips), notices)


def _sans(cert: x509.Certificate) -> tuple[list[str], list[str]]:
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return [], []
    return [n.lower() for n in san.get_values_for_type(x509.DNSName)], [str(a) for a in san.get_values_for_type(x509.IPAddress)]


def _needed(host: str) -> tuple[list[str], list[str]]:
    """The names a certificate for `host` must hold: the address itself, or for the wildcard
    (0.0.0.0, ::) the machine's name. The wildcard's interface addresses are named when a
    certificate is made but not required after: an address the network hands out anew would
    otherwise change the certificate, and with it the fingerprint clients trust."""
    ip = _ip(host)
    if ip is None:
        return [_dns(host)], []
    if ip.is_unspecified:
        machine = _machine_name()
        return ([machine] if machine else []), []
    return [], [str(ip)]


def _names(host: str) -> tuple[list[str], list[str]]:
    """Every name a new certificate for `host` holds: localhost and the loopback addresses, the
    machine's name (and NAME.local, its mDNS name), the host asked, and for the wildcard the
    machine's current addresses."""
    dns, ips = ["localhost"], ["127.0.0.1", "::1"]
    machine = _machine_name()
    if machine:
        dns.append(machine)
        if "." not in machine:
            dns.append(f"{machine}.local")
    ip = _ip(host)
    if ip is None:
        dns = _union(dns, [_dns(host)])
    elif ip.is_unspecified:
        ips = _union(ips, _interface_addresses())
    else:
        ips = _union(ips, [str(ip)])
    return dns, ips


def _machine_name() -> str | None:
    name = socket.gethostname().lower().rstrip(".")
    try:
        return _dns(name) if name else None
    except TlsUnavailable:
        return None


def _dns(name: str) -> str:
    """`name` as a certificate's DNS name (IDNA for a name that is not ASCII)."""
    name = name.lower().rstrip(".")
    try:
        name.encode("ascii")
        return name
    except UnicodeEncodeError:
        pass
    try:
        return name.encode("idna").decode("ascii")
    except UnicodeError:
        raise TlsUnavailable(f"{name!r} cannot be named in a certificate") from None


def _interface_addresses() -> list[str]:
    import psutil

    out: list[str] = []
    for entries in psutil.net_if_addrs().values():
        for entry in entries:
            if entry.family in (socket.AF_INET, socket.AF_INET6) and "%" not in entry.address:
                ip = _ip(entry.address)
                if ip is not None and not ip.is_link_local:
                    out.append(str(ip))
    return out


def _ip(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def _union(first: list[str], second: list[str]) -> list[str]:
    return list(dict.fromkeys([*first, *second]))
