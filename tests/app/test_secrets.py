"""The token store: secure keyring when there is one, memory otherwise, a notice for every failure."""

from __future__ import annotations

from pathlib import Path

import pytest
from keyring.backends import chainer, fail, null

import app.hub_token as secrets
import app.keyring_policy as keyring_policy
from app.hub_token import USERNAME, InvalidToken, MemoryToken, TokenStore, load_token, validate_token_format
from app.keyring_policy import SERVICE, classify_backend, describe_backend
from tests.support.fake_hub import VALID_TOKEN
from tests.support.keyrings import (
    DroppingKeyring,
    InMemoryKeyring,
    LockedKeyring,
    NotViableKeyring,
    PlaintextKeyring,
    RefusingKeyring,
    Unregistered,
    use_keyring,
)


@pytest.fixture(autouse=True)
def _forget_process_token():
    secrets.PROCESS_MEMORY.clear()
    yield
    secrets.PROCESS_MEMORY.clear()


def store_with(backend) -> TokenStore:
    return TokenStore(backend=backend, memory=MemoryToken())


# --- secure keyring: persisted ------------------------------------------------------------------


def test_secure_keyring_persists_reads_and_clears() -> None:
    kr = InMemoryKeyring()
    store = store_with(kr)
    assert classify_backend(kr) is True
    result = store.save(f"  {VALID_TOKEN}\n")
    assert result.persisted is True and result.notice is None
    assert kr.passwords == {(SERVICE, USERNAME): VALID_TOKEN}
    assert store.get() == VALID_TOKEN
    # A new store (a new run) with an empty memory still finds it.
    assert store_with(kr).get() == VALID_TOKEN
    st = store.status()
    assert (st.present, st.storage, st.secure, st.notice) == (True, "keyring", True, None)
    store.clear()
    assert kr.passwords == {} and store.get() is None
    assert store.status().storage == "none"
    store.clear()  # clearing twice is fine
    assert store.last_notice is None


def test_default_backend_and_load_token_use_keyrings_choice() -> None:
    with use_keyring(InMemoryKeyring()) as kr:
        assert load_token() is None
        assert TokenStore().save(VALID_TOKEN).persisted
        assert kr.passwords[(SERVICE, USERNAME)] == VALID_TOKEN
        assert load_token() == VALID_TOKEN
        assert secrets.PROCESS_MEMORY.get() is None  # the keyring is the one copy
        TokenStore().clear()
        assert load_token() is None


# --- no keyring (fail backend) ----------------------------------------------------------------


def test_fail_backend_keeps_the_token_in_memory_with_a_notice() -> None:
    kr = fail.Keyring()
    assert classify_backend(kr) is False
    store = store_with(kr)
    result = store.save(VALID_TOKEN)
    assert result.persisted is False
    assert "No secure keyring" in result.notice and "in memory for this run only" in result.notice
    assert VALID_TOKEN not in result.notice
    assert store.get() == VALID_TOKEN
    st = store.status()
    assert (st.present, st.storage, st.secure) == (True, "memory", False)
    assert st.backend == "no keyring backend"
    store.clear()
    assert store.get() is None and store.status().present is False


def test_fail_backend_load_token_uses_this_processs_memory() -> None:
    with use_keyring(fail.Keyring()):
        assert load_token() is None  # NoKeyringError never escapes
        assert TokenStore().status().present is False
        assert TokenStore().save(VALID_TOKEN).persisted is False
        assert load_token() == VALID_TOKEN
        assert TokenStore().status().storage == "memory"


# --- null and plain-text backends are not secure ----------------------------------------------


def test_null_backend_is_insecure_and_never_written(monkeypatch: pytest.MonkeyPatch) -> None:
    kr = null.Keyring()
    calls = []
    monkeypatch.setattr(kr, "set_password", lambda *a: calls.append(a))
    assert classify_backend(kr) is False
    result = store_with(kr).save(VALID_TOKEN)
    assert result.persisted is False and "keeps nothing" in result.notice
    assert calls == []


def test_keyrings_alt_plaintext_is_insecure_and_never_written() -> None:
    kr = PlaintextKeyring()
    assert type(kr).__module__ == "keyrings.alt.file"
    assert classify_backend(kr) is False
    store = store_with(kr)
    result = store.save(VALID_TOKEN)
    assert result.persisted is False and "plain text" in result.notice
    assert kr.set_calls == 0 and kr.passwords == {}
    assert store.status().backend == "plain-text file keyring (keyrings.alt)"
    # keyrings.alt's real file, should it exist on this machine, never holds the canary.
    alt_dir = Path.home() / ".local" / "share" / "python_keyring"
    if alt_dir.exists():
        from tests.support.keyrings import files_containing

        assert files_containing(alt_dir, VALID_TOKEN) == []


def test_low_priority_and_not_viable_backends_are_insecure() -> None:
    class Meh(InMemoryKeyring):
        priority = 0.5  # keyring itself does not recommend it

    assert classify_backend(Meh()) is False
    assert classify_backend(NotViableKeyring()) is False
    assert classify_backend(None) is False


def test_chainer_uses_its_secure_child_and_skips_the_plaintext_one() -> None:
    secure_child, plain_child = InMemoryKeyring(), PlaintextKeyring()
    plain_child_first = type("Plain", (PlaintextKeyring,), {"priority": 20, "__module__": "keyrings.alt.file"})()

    class Chain(chainer.ChainerBackend, metaclass=Unregistered):
        backends = [plain_child_first, secure_child, plain_child]

    kr = Chain()
    assert classify_backend(kr) is True
    store = store_with(kr)
    assert store.save(VALID_TOKEN).persisted is True
    assert secure_child.passwords == {(SERVICE, USERNAME): VALID_TOKEN}
    assert plain_child_first.passwords == {} and plain_child.passwords == {}
    assert store.status().backend == describe_backend(secure_child)


def test_chainer_with_no_secure_child_is_insecure() -> None:
    class Chain(chainer.ChainerBackend, metaclass=Unregistered):
        backends = [PlaintextKeyring(), null.Keyring()]

    class Empty(chainer.ChainerBackend, metaclass=Unregistered):
        backends: list = []

    for kr in (Chain(), Empty()):
        assert classify_backend(kr) is False
        result = store_with(kr).save(VALID_TOKEN)
        assert result.persisted is False and "none of the keyrings found is secure" in result.notice


# --- keyring errors become notices --------------------------------------------------------------


def test_locked_keyring_is_a_notice_not_a_traceback() -> None:
    store = store_with(LockedKeyring())
    assert store.get() is None and store.status().present is False
    assert "locked" in store.status().notice
    result = store.save(VALID_TOKEN)
    assert result.persisted is False
    assert "locked" in result.notice and "in memory for this run only" in result.notice
    assert store.get() == VALID_TOKEN  # the run can still use it
    st = store.status()
    assert (st.storage, st.secure) == ("memory", True) and "could not be saved" in st.notice
    store.clear()  # memory is cleared; the keyring could not even be asked
    assert store.get() is None
    assert store.last_notice and "locked" in store.last_notice


def test_password_set_error_never_echoes_the_token() -> None:
    store = store_with(RefusingKeyring())
    result = store.save(VALID_TOKEN)
    assert result.persisted is False and "refused to store it" in result.notice
    assert VALID_TOKEN not in result.notice


def test_unexpected_backend_error_is_a_redacted_notice() -> None:
    class Broken(InMemoryKeyring):
        def set_password(self, service, username, password):
            raise OSError(f"D-Bus said no to {password}")

    result = store_with(Broken()).save(VALID_TOKEN)
    assert result.persisted is False and "OSError" in result.notice
    assert VALID_TOKEN not in result.notice and "hf_***" in result.notice


def test_backend_that_silently_drops_the_token_is_caught() -> None:
    kr = DroppingKeyring()
    store = store_with(kr)
    result = store.save(VALID_TOKEN)
    assert result.persisted is False and "did not keep the token" in result.notice
    assert kr.set_calls == 1 and store.get() == VALID_TOKEN


def test_load_token_never_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*a, **k):
        raise RuntimeError("keyring configuration is broken")

    monkeypatch.setattr(keyring_policy, "default_backend", boom)
    assert load_token() is None
    with use_keyring(LockedKeyring()):
        monkeypatch.undo()
        assert load_token() is None


# --- token format -------------------------------------------------------------------------------


def test_valid_token_is_stripped() -> None:
    assert validate_token_format(f"\t{VALID_TOKEN}\r\n") == VALID_TOKEN


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   \n",
        f"{VALID_TOKEN} {VALID_TOKEN}",
        f"{VALID_TOKEN}\n{VALID_TOKEN}",
        f"Bearer {VALID_TOKEN}",
        f'"{VALID_TOKEN}"',
        "hf_short",
        "hf_" + "a" * 300,
        "not-a-token-at-all",
        "hf_abc-def_ghijklmnop",
        None,
    ],
)
def test_bad_token_text_is_refused_with_a_sentence_that_does_not_quote_it(text) -> None:
    with pytest.raises(InvalidToken) as err:
        validate_token_format(text)
    message = str(err.value)
    assert message.endswith(".") and len(message) > 20
    assert VALID_TOKEN not in message and "hf_abc" not in message
    with pytest.raises(InvalidToken):
        store_with(InMemoryKeyring()).save(text)


def test_nothing_shows_the_token_in_its_repr() -> None:
    memory = MemoryToken()
    store = TokenStore(backend=InMemoryKeyring(), memory=memory)
    result = store.save(VALID_TOKEN)
    memory.set(VALID_TOKEN)
    for obj in (store, memory, result, store.status()):
        assert VALID_TOKEN not in repr(obj)


def test_broken_keyring_configuration_is_a_notice(monkeypatch: pytest.MonkeyPatch) -> None:
    import keyring

    def broken():
        raise ModuleNotFoundError("No module named 'no_such_backend'")

    monkeypatch.setattr(keyring, "get_keyring", broken)
    store = TokenStore(memory=MemoryToken())
    st = store.status()
    assert (st.present, st.storage, st.secure) == (False, "none", False)
    assert "configuration could not be loaded" in st.notice and st.backend == "no keyring"
    result = store.save(VALID_TOKEN)
    assert result.persisted is False and store.get() == VALID_TOKEN
