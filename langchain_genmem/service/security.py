"""Who may call the service: API keys, their persona scopes, and where the server may listen.

A key is sent as ``Authorization: Bearer KEY`` or ``X-API-Key: KEY``. A key may be scoped to
some personas; a key without scope reaches every persona. With no key configured the server
answers anyone who can reach it, so it refuses to listen anywhere but the loopback interface.

Keys file (``genmem serve --keys-file keys.json``)::

    {"keys": [
        {"key": "a-long-random-secret-for-dify", "personas": ["Isabella Rodriguez"]},
        {"key": "another-long-random-secret-admin"}
    ]}
"""

from __future__ import annotations

import hmac
import ipaddress
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from langchain_genmem.core.errors import ConfigurationError, ValidationError

MIN_KEY_CHARS = 16
"""Shortest accepted key: a guessable key is a configuration mistake."""
KEY_VARIABLE = "GENMEM_API_KEY"
"""The environment variable holding the key (never the command line, which ``ps`` shows)."""
NEW_KEY = "python -c 'import secrets; print(secrets.token_urlsafe(32))'"
"""A command that prints a new key."""
LOOPBACK_NAMES = ("localhost",)


@dataclass(frozen=True)
class ApiKey:
    """One key and the personas it reaches.

    Attributes:
        key: the secret.
        personas: the personas it may read and write; None for every persona.
    """

    key: str
    personas: frozenset[str] | None = None

    def allows(self, persona: str) -> bool:
        """Whether this key reaches a persona.

        Args:
            persona: the persona.

        Returns:
            True when it may.
        """
        return self.personas is None or persona in self.personas


OPEN_ACCESS = ApiKey("", None)
"""The caller of a server without keys (loopback only): reaches every persona."""


class KeyRing:
    """The keys a server accepts.

    Args:
        keys: the keys; none means no authentication (loopback only).

    Raises:
        ConfigurationError: a key is too short, holds white space, or is given twice.
    """

    def __init__(self, keys: Iterable[ApiKey] = ()) -> None:
        self.keys = tuple(keys)
        seen: set[str] = set()
        for k in self.keys:
            if len(k.key) < MIN_KEY_CHARS or any(c.isspace() for c in k.key):
                msg = (
                    f"API key {_masked(k.key)!r}: use at least {MIN_KEY_CHARS} characters "
                    f"without spaces ({NEW_KEY})"
                )
                raise ConfigurationError(msg)
            if k.key in seen:
                msg = f"API key {_masked(k.key)!r} is given twice"
                raise ConfigurationError(msg)
            seen.add(k.key)

    @classmethod
    def from_options(cls, keys: Sequence[str] = (), keys_file: Path | None = None) -> KeyRing:
        """The keys of ``--api-key`` (every persona) and of a keys file (scoped).

        Args:
            keys: unscoped keys.
            keys_file: a JSON keys file, or None.

        Returns:
            The key ring.
        """
        ring = [ApiKey(k) for k in keys]
        if keys_file is not None:
            ring += read_keys_file(keys_file)
        return cls(ring)

    @property
    def enabled(self) -> bool:
        """Whether callers must present a key."""
        return bool(self.keys)

    def authenticate(self, token: str | None) -> ApiKey | None:
        """The key matching a presented secret, compared in constant time.

        Args:
            token: what the caller sent, or None.

        Returns:
            The key, :data:`OPEN_ACCESS` when no key is configured, or None.
        """
        if not self.enabled:
            return OPEN_ACCESS
        if not token:
            return None
        found = None
        given = token.encode()
        for k in self.keys:  # every key is compared, so timing does not tell which matched
            if hmac.compare_digest(given, k.key.encode()):
                found = k
        return found


def read_keys_file(path: Path) -> list[ApiKey]:
    """The keys of a JSON keys file (see the module docstring).

    Args:
        path: the file.

    Returns:
        The keys.

    Raises:
        ValidationError: the file cannot be read or is not in the expected shape (names
            the entry).
    """
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        msg = f"--keys-file {path}: cannot read it as JSON ({e})"
        raise ValidationError(msg, field="keys_file") from e
    entries = data.get("keys") if isinstance(data, dict) else None
    if not isinstance(entries, list) or not entries:
        msg = f'--keys-file {path}: expected {{"keys": [{{"key": "...", "personas": [...]}}]}}'
        raise ValidationError(msg, field="keys_file")
    return [_entry(e, i, path) for i, e in enumerate(entries)]


def _entry(entry: object, index: int, path: Path) -> ApiKey:
    where = f"--keys-file {path}: keys[{index}]"
    if not isinstance(entry, dict) or not isinstance(entry.get("key"), str):
        msg = f"{where}: expected an object with a 'key' text"
        raise ValidationError(msg, field=f"keys[{index}].key")
    personas = entry.get("personas")
    if personas is None:
        return ApiKey(entry["key"])
    if not isinstance(personas, list) or not all(isinstance(p, str) and p for p in personas):
        msg = f"{where}.personas: expected a list of persona names"
        raise ValidationError(msg, field=f"keys[{index}].personas")
    return ApiKey(entry["key"], frozenset(personas))


def is_loopback(host: str) -> bool:
    """Whether a listening address is only reachable from this machine.

    Args:
        host: a host name or IP address.

    Returns:
        True for ``127.0.0.0/8``, ``::1`` and ``localhost``.
    """
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_listen(host: str, keys: KeyRing) -> None:
    """Refuse to listen beyond loopback when no key is configured.

    Args:
        host: the address to listen on.
        keys: the configured keys.

    Raises:
        ConfigurationError: no key and a non-loopback address.
    """
    if not keys.enabled and not is_loopback(host):
        msg = (
            f"--host {host}: refusing to listen beyond 127.0.0.1 without an API key; set one "
            f"in the environment (export {KEY_VARIABLE}=\"$({NEW_KEY})\") or give --keys-file "
            "FILE, or listen on 127.0.0.1"
        )
        raise ConfigurationError(msg)


def _masked(key: str) -> str:
    return key[:3] + "…" if len(key) > 3 else "…"
