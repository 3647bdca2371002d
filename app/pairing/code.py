"""The pairing code `cove serve pair` shows and `cove remote pair` takes: 36 characters of
Crockford's base32 in nine groups of four, e.g. `7M2Q-K9XD-…-4TZB`.

- The first 19 characters (95 bits) are the start of the SHA-256 fingerprint of the serving
  machine's certificate (the SHA-256 of its DER bytes, its leading bits): the client compares
  them with the certificate it is shown before it sends anything, so a machine in the middle
  would need another certificate whose SHA-256 starts with the same 95 bits.
- The next 16 characters (80 bits) are a random secret (`secrets`); the server keeps only its
  SHA-256.
- The last character is a check character: the code's 35 values c_1…c_35, taken as elements of
  GF(32) (the polynomial x^5 + x^2 + 1), weighted by a^1…a^35 (a the field's generator) and added
  up. One character typed wrong, or two neighbours swapped, always changes that sum, so such a
  typo is told on this machine before anything is sent.

Reading a code ignores case, dashes and white space, and reads O as 0 and I or L as 1, as Crockford's
alphabet does; U and the other letters it leaves out are refused with a sentence."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass

# Where the person reads the code, said in each refusal (the window's Pair dialog or `cove serve pair`).
SHOWN = "the other machine showed (Pair a machine…, or `cove serve pair`)"
ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"  # Crockford's base32: no I, L, O, U
FINGERPRINT_CHARS = 19  # 95 bits of the certificate's SHA-256
SECRET_CHARS = 16  # 80 random bits
CODE_CHARS = FINGERPRINT_CHARS + SECRET_CHARS + 1  # and the check character
GROUP = 4
FINGERPRINT_BITS = 5 * FINGERPRINT_CHARS
SECRET_BITS = 5 * SECRET_CHARS

_VALUE = {ch: i for i, ch in enumerate(ALPHABET)} | {"O": 0, "I": 1, "L": 1}
_POLY = 0b100101  # x^5 + x^2 + 1, primitive: its root generates the 31 non-zero elements of GF(32)


class PairingCodeError(ValueError):
    """Text that is not a pairing code; the message is a sentence for the person."""


@dataclass(frozen=True)
class PairingCode:
    fingerprint_part: str  # FINGERPRINT_CHARS characters: the leading bits of the certificate's SHA-256
    secret: str  # SECRET_CHARS characters

    def __str__(self) -> str:
        body = self.fingerprint_part + self.secret
        whole = body + ALPHABET[_check(body)]
        return "-".join(whole[i : i + GROUP] for i in range(0, len(whole), GROUP))

    def names(self, der: bytes) -> bool:
        """Whether the certificate `der` (its DER bytes) is the one the code was made for."""
        return hmac.compare_digest(fingerprint_part(der), self.fingerprint_part)


def fingerprint_part(der: bytes) -> str:
    """The code's first characters for the certificate `der`: the leading FINGERPRINT_BITS of its SHA-256."""
    digest = int.from_bytes(hashlib.sha256(der).digest(), "big")
    return _encode(digest >> (256 - FINGERPRINT_BITS), FINGERPRINT_CHARS)


def new_code(der: bytes) -> PairingCode:
    """A code for the certificate `der` with a new random secret."""
    return PairingCode(fingerprint_part(der), _encode(secrets.randbits(SECRET_BITS), SECRET_CHARS))


def secret_digest(secret: str) -> str:
    """What the server keeps of a secret: its SHA-256 in hex (the secret has 80 random bits)."""
    return hashlib.sha256(secret.encode("ascii", "replace")).hexdigest()


def parse_code(text: str) -> PairingCode:
    """The code in `text`, or PairingCodeError with a sentence (a wrong character, the wrong
    length, or a typo the check character shows)."""
    chars = "".join(ch for ch in (text or "").upper() if ch != "-" and not ch.isspace())
    for ch in chars:
        if ch not in _VALUE:
            shown = ch if ch.isprintable() else repr(ch)
            raise PairingCodeError(
                f"'{shown}' is not in a pairing code: it has only the digits and the letters A to Z but I, L, O and U; "
                f"check it against the code {SHOWN}."
            )
    if len(chars) != CODE_CHARS:
        raise PairingCodeError(
            f"a pairing code has {CODE_CHARS} characters (nine groups of four); this one has {len(chars)}: check it against "
            f"the code {SHOWN}."
        )
    canonical = "".join(ALPHABET[_VALUE[ch]] for ch in chars)
    body, check = canonical[:-1], canonical[-1]
    if ALPHABET[_check(body)] != check:
        raise PairingCodeError(
            f"the pairing code has a typo (its last character does not match the rest): check it against the code {SHOWN}."
        )
    return PairingCode(body[:FINGERPRINT_CHARS], body[FINGERPRINT_CHARS:])


def is_secret(text: object) -> bool:
    """Whether `text` has the form of a code's secret (what the server is sent)."""
    return isinstance(text, str) and len(text) == SECRET_CHARS and all(ch in ALPHABET for ch in text)


def _encode(value: int, chars: int) -> str:
    out = []
    for _ in range(chars):
        out.append(ALPHABET[value & 31])
        value >>= 5
    return "".join(reversed(out))


def _mul(a: int, b: int) -> int:
    """a·b in GF(32)."""
    product = 0
    while b:
        if b & 1:
            product ^= a
        b >>= 1
        a <<= 1
        if a & 32:
            a ^= _POLY
    return product


def _check(body: str) -> int:
    """The check value of `body`: the sum over GF(32) of each character's value times a^i (i from 1)."""
    total, weight = 0, 1
    for ch in body:
        weight = _mul(weight, 2)
        total ^= _mul(_VALUE[ch], weight)
    return total
