"""The base of every process's settings: environment variables read once, typed, refused clearly.

Each field names its variable(s) in ``validation_alias`` (several: the first one set wins, e.g.
``PODMEDIC_TEMPORAL_ADDRESS`` before the temporal CLI's ``TEMPORAL_ADDRESS``). An empty variable
counts as unset. A bad value is refused with every bad variable, its value and the reason, in one
message, so a pod's CrashLoopBackOff log says what to fix.
"""

from __future__ import annotations

import contextvars
import os
from collections.abc import Iterator, Mapping
from typing import Any, Self

from pydantic import AliasChoices, Field, PrivateAttr, SecretStr, ValidationError
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, EnvSettingsSource, PydanticBaseSettingsSource, SettingsConfigDict

# The environment a ``load(env=...)`` reads instead of ``os.environ`` (tests, the manifests check).
_ENVIRON: contextvars.ContextVar[Mapping[str, str] | None] = contextvars.ContextVar("podmedic_environ",
                                                                                    default=None)


class SettingsError(ValueError):
    """Environment variables that cannot be used; the message names each one and the reason."""


class _Environment(EnvSettingsSource):
    """``os.environ``, or the mapping ``ProcessSettings.load`` was given."""

    def _load_env_vars(self) -> Mapping[str, str | None]:  # the hook pydantic-settings' dotenv source uses too
        given = _ENVIRON.get()
        environ = os.environ if given is None else given
        return {k: v for k, v in environ.items() if v != ""}


def var(default: Any, *names: str, description: str) -> Any:
    """A setting read from the first of ``names`` that is set, documented by ``description``."""
    alias: str | AliasChoices = names[0] if len(names) == 1 else AliasChoices(*names)
    return Field(default, validation_alias=alias, description=description)


def variables(field: FieldInfo) -> list[str]:
    """The environment variables of ``field``, in the order they are tried."""
    alias = field.validation_alias
    if isinstance(alias, str):
        return [alias]
    if isinstance(alias, AliasChoices):
        return [str(choice) for choice in alias.choices]
    return []


class ProcessSettings(BaseSettings):
    """Settings of one podmedic process, from its environment. Subclasses mix in the groups they need."""

    model_config = SettingsConfigDict(case_sensitive=True, extra="ignore", frozen=True)
    _sources: dict[str, str] = PrivateAttr(default_factory=dict)

    @classmethod
    def settings_customise_sources(cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
                                   env_settings: PydanticBaseSettingsSource,
                                   dotenv_settings: PydanticBaseSettingsSource,
                                   file_secret_settings: PydanticBaseSettingsSource,
                                   ) -> tuple[PydanticBaseSettingsSource, ...]:
        """The environment only: no .env file, no secrets dir (Kubernetes mounts files; their paths are settings)."""
        return init_settings, _Environment(settings_cls, case_sensitive=True)

    @classmethod
    def load(cls, env: Mapping[str, str] | None = None) -> Self:
        """Read the settings from ``env`` (default: the process environment).

        Raises:
            SettingsError: naming every variable whose value is wrong, with its value and why.
        """
        token = _ENVIRON.set(env)
        try:
            settings = cls()
        except ValidationError as exc:
            raise SettingsError(_explain(cls, exc)) from None
        finally:
            _ENVIRON.reset(token)
        environ = os.environ if env is None else env
        settings._sources = {name: next((v for v in variables(field) if environ.get(v)), "")
                             for name, field in cls.model_fields.items() if name in settings.model_fields_set}
        return settings

    @classmethod
    def groups(cls) -> Iterator[tuple[str, list[str]]]:
        """(group title, field names) for each settings group this process mixes in, in order."""
        for klass in cls.__mro__:
            own = [name for name in getattr(klass, "__annotations__", {}) if name in cls.model_fields]
            title = getattr(klass, "TITLE", "")
            if own and title:
                yield title, own

    def is_set(self, name: str) -> bool:
        """Whether ``name`` came from the environment (not its default)."""
        return name in self.model_fields_set

    def source(self, name: str) -> str:
        """The variable that set ``name``, or ``default``."""
        return self._sources.get(name) or "default"

    def shown(self, name: str) -> str:
        """The value of ``name`` for people: secrets as ``(set)``, unset as ``(unset)``."""
        value = getattr(self, name)
        if value is None:
            return "(unset)"
        if isinstance(value, SecretStr):
            return "(set)" if value.get_secret_value() else "(unset)"
        if isinstance(value, bool):
            return "1" if value else "0"
        if isinstance(value, tuple):
            return ":".join(str(part) for part in value)
        return str(value)


def _explain(cls: type[ProcessSettings], exc: ValidationError) -> str:
    names_of: dict[str, list[str]] = {}
    secret: set[str] = set()
    for field in cls.model_fields.values():
        for variable in variables(field):
            names_of[variable] = variables(field)
            if "SecretStr" in str(field.annotation):
                secret.add(variable)
    problems = []
    for error in exc.errors():
        where = str(error["loc"][0]) if error["loc"] else ""
        value = error.get("input")
        shown = f"={value!r}" if isinstance(value, str) and where and where not in secret else ""
        reason = str(error["msg"]).removeprefix("Value error, ")
        problems.append(f"{' / '.join(names_of.get(where, [where]))}{shown}: {reason}" if where else reason)
    return "; ".join(problems)
