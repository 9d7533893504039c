"""The one-line settings error both programs stop with (lantern_wire/settings_errors.py)."""
import pytest
from pydantic import BaseModel, ConfigDict, PositiveInt, model_validator

from lantern_wire.settings_errors import SettingsError, validated


class Example(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, alias_generator=str.upper, validate_by_name=True)

    url: str = "http://127.0.0.1"
    workers: PositiveInt = 2
    token: str | None = None
    limits: dict[str, int] = {}

    @model_validator(mode="after")
    def consistent(self):
        if self.workers > 8 and not self.token:
            raise ValueError("WORKERS above 8 needs a TOKEN")
        return self


def refusal(values, origins=None, secrets=()):
    with pytest.raises(SettingsError) as refused:
        validated(Example, values, origins or {}, program="The example", secrets=secrets)
    return str(refused.value)


def test_good_settings_are_the_model():
    assert validated(Example, {"WORKERS": 3}, {}, program="The example") == Example(workers=3)


def test_each_wrong_setting_is_named_once_with_its_origin_value_and_what_it_takes():
    line = refusal({"WORKERS": "many", "LIMITS": {"pages": "all"}, "TOKEN": ["x"]},
                   {"WORKERS": "EXAMPLE_WORKERS", "TOKEN": "the command line"}, secrets={"TOKEN"})
    assert line == ("The example cannot start: WORKERS='many' (from EXAMPLE_WORKERS): should be a valid integer, "
                    "unable to parse string as an integer; TOKEN=(hidden) (from the command line): should be a "
                    "valid string; LIMITS['pages']={'pages': 'all'} (from the default): should be a valid integer, "
                    "unable to parse string as an integer")
    assert isinstance(SettingsError(line), SystemExit)  # the programs print it and stop, with no traceback


def test_a_password_in_a_url_is_not_repeated():
    assert refusal({"URL": ["postgresql://lantern:s3cret@db/lantern"]}) == (
        "The example cannot start: URL=['postgresql://lantern:***@db/lantern'] (from the default): "
        "should be a valid string")


def test_a_check_of_several_settings_is_its_own_message():
    assert refusal({"WORKERS": 9}) == "The example cannot start: WORKERS above 8 needs a TOKEN"
