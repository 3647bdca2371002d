"""The pairing code's format (app/pairing/code.py): it reads back as written, whatever the case,
dashes, spaces and Crockford's look-alike letters; its first characters are the leading bits of
the certificate's SHA-256; and its check character tells every single wrong character and every
swap of two neighbours, with a sentence."""

from __future__ import annotations

import hashlib

import pytest

from app.pairing.code import ALPHABET, CODE_CHARS, FINGERPRINT_BITS, PairingCodeError, fingerprint_part, is_secret, new_code, parse_code

DER = b"not really a certificate, but bytes to hash"


def _plain(code: str) -> str:
    return code.replace("-", "")


def test_a_code_reads_back_as_written_in_groups_of_four() -> None:
    code = new_code(DER)
    written = str(code)
    assert len(_plain(written)) == CODE_CHARS == 36
    assert all(len(group) == 4 for group in written.split("-")) and written.count("-") == 8
    assert parse_code(written) == code
    assert parse_code(written.lower()) == code
    assert parse_code(" " + _plain(written) + " ") == code
    assert parse_code(" ".join(written.split("-"))) == code
    assert parse_code(written + "\r\n") == code
    assert is_secret(code.secret) and code.names(DER) and not code.names(DER + b"!")


def test_the_secret_is_new_each_time() -> None:
    assert len({new_code(DER).secret for _ in range(50)}) == 50


def test_the_fingerprint_part_is_the_leading_bits_of_the_sha256() -> None:
    part = fingerprint_part(DER)
    value = 0
    for ch in part:
        value = value * 32 + ALPHABET.index(ch)
    assert value == int.from_bytes(hashlib.sha256(DER).digest(), "big") >> (256 - FINGERPRINT_BITS)
    assert FINGERPRINT_BITS >= 80


def test_crockfords_look_alikes_are_read_as_the_digits() -> None:
    code = new_code(DER)
    plain = _plain(str(code))
    if "0" not in plain and "1" not in plain:
        pytest.skip("this code has neither 0 nor 1")  # pragma: no cover - about one code in 500
    looks = plain.replace("0", "o").replace("1", "l")
    assert parse_code(looks) == code
    assert parse_code(plain.replace("1", "I")) == code


@pytest.mark.parametrize("seed", range(5))
def test_every_single_wrong_character_is_told(seed: int) -> None:
    plain = _plain(str(new_code(DER + bytes([seed]))))
    for i, right in enumerate(plain):
        for wrong in ALPHABET:
            if wrong == right:
                continue
            typo = plain[:i] + wrong + plain[i + 1 :]
            with pytest.raises(PairingCodeError, match="has a typo"):
                parse_code(typo)


@pytest.mark.parametrize("seed", range(5))
def test_every_swap_of_two_neighbours_is_told(seed: int) -> None:
    plain = _plain(str(new_code(DER + bytes([seed]))))
    for i in range(len(plain) - 1):
        if plain[i] == plain[i + 1]:
            continue
        swapped = plain[:i] + plain[i + 1] + plain[i] + plain[i + 2 :]
        with pytest.raises(PairingCodeError, match="has a typo"):
            parse_code(swapped)


def test_other_mistakes_get_a_sentence() -> None:
    plain = _plain(str(new_code(DER)))
    with pytest.raises(PairingCodeError, match="has 36 characters .* this one has 35"):
        parse_code(plain[:-1])
    with pytest.raises(PairingCodeError, match="'U' is not in a pairing code"):
        parse_code("U" + plain[1:])
    with pytest.raises(PairingCodeError, match="is not in a pairing code"):
        parse_code(plain[:5] + "\x1b" + plain[6:])
    with pytest.raises(PairingCodeError, match="this one has 0"):
        parse_code("")
