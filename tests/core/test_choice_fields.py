"""#26.8: every field that takes one of a few strings names them in its 400, whatever was sent instead."""
import marshmallow as ma

from app.core.fields import Choice


def test_a_value_of_another_type_is_told_the_allowed_values(client):
    answer = client.post("/browsers", json={"memory": 3})
    assert answer.status_code == 400
    assert answer.get_json()["details"] == [
        {"code": "invalid", "field": "memory", "message": "Must be one of: 1GiB, 2GiB, 4GiB, 8GiB, 16GiB."}]
    listed = client.get("/browsers?status=7x")
    assert "active, deleted, all" in listed.get_json()["details"][0]["message"]


def _schemas(base=ma.Schema):
    for schema in base.__subclasses__():
        yield schema
        yield from _schemas(schema)


def _fields(field):
    yield field
    for inner in (getattr(field, "inner", None), getattr(field, "value_field", None)):
        if inner is not None:
            yield from _fields(inner)


def test_every_field_of_a_few_strings_is_a_choice(app):
    plain = []
    for schema in _schemas():
        if not schema.__module__.startswith("app."):
            continue
        for name, declared in schema().fields.items():
            for field in _fields(declared):
                one_of = any(isinstance(rule, ma.validate.OneOf) for rule in field.validators)
                if one_of and not isinstance(field, Choice):
                    plain.append(f"{schema.__module__}.{schema.__name__}.{name}")
    assert plain == []
