"""Bulk writes for the attempt pipeline's hot path.

``bulk_update`` builds a CASE per field per row and ``bulk_create`` prepares and compiles
every value of every object: on a latency-bound run that Python cost, not the database,
was most of an attempt's overhead. These helpers build each statement once. Values still
go through each field's own ``get_db_prep_save``, so JSON, decimals and times are stored
exactly as the ORM would store them. No signals are sent and no ``auto_now`` fields are
filled: callers pass those values themselves.
"""

from __future__ import annotations

import datetime
import decimal
import math
import uuid
from collections.abc import Callable
from typing import Any, cast

import psycopg
from django.db import connections, models, router
from django.db.models import Field, Model
from psycopg.types.json import Jsonb

from prbench.json_bytes import json_bytes


def update_by_pk(model: type[Model], rows: dict[int, dict]) -> None:
    """Set each row's fields by primary key: one statement per set of fields the rows set (an
    agent's attempt sets its turns, a single-turn one in the same batch does not)."""
    shapes: dict[tuple[str, ...], dict[int, dict]] = {}
    for pk, values in rows.items():
        shapes.setdefault(tuple(values), {})[pk] = values
    for names, same in shapes.items():
        _update_same_fields(model, list(names), same)


def _update_same_fields(model: type[Model], names: list[str], rows: dict[int, dict]) -> None:
    connection = connections[router.db_for_write(model)]
    fields = _fields(model, names)
    if connection.vendor == "postgresql":
        _update_from_document(model, fields, names, rows, connection)
        return
    preparers = [_preparer(field, connection) for field in fields]
    params = [[*_prepared(preparers, [values[name] for name in names]), pk] for pk, values in rows.items()]
    quote = connection.ops.quote_name
    table, pk_column = quote(model._meta.db_table), quote(str(cast(Field, model._meta.pk).column))
    assignments = ", ".join(f"{quote(str(field.column))} = %s" for field in fields)
    with connection.cursor() as cursor:
        cursor.executemany(f"UPDATE {table} SET {assignments} WHERE {pk_column} = %s", params)


def _update_from_document(
    model: type[Model], fields: list[Field], names: list[str], rows: dict[int, dict], connection
) -> None:
    """Postgres: ``UPDATE t SET c = v.c, ... FROM jsonb_to_recordset(%s) AS v(...) WHERE t.pk = v.pk``,
    one statement for the chunk with the chunk's values as one JSON document.

    An executemany is one statement per row, each parsed and planned, which cost Postgres more
    than the writes; a VALUES list of one placeholder per value made psycopg parse a new, long
    text for every chunk; Django's cursors quote every value into the text in Python; and
    binding one array per column had psycopg dump every value of the chunk one by one in
    Python, each JSON value encoded on its own first: a fifth of a worker's CPU (issue 31).
    One encoding of the whole chunk (``_document_json``), the JSON columns' values nested as
    they are, and Postgres reads each value into its column's type as it reads that type's text
    (jsonb_to_recordset). The text is the same for every chunk of these columns. Errors come out
    as Django's (DataError, OperationalError …), as from its cursors."""
    quote = connection.ops.quote_name
    pk = cast(Field, model._meta.pk)
    keys = [f"v{index}" for index in range(len(fields) + 1)]
    types = [_value_type(field, connection) for field in (*fields, pk)]
    assignments = ", ".join(f"{quote(str(field.column))} = v.{key}" for field, key in zip(fields, keys, strict=False))
    columns = ", ".join(f"{key} {db_type}" for key, db_type in zip(keys, types, strict=True))
    sql = (
        f"UPDATE {quote(model._meta.db_table)} AS t SET {assignments} "
        f"FROM jsonb_to_recordset(%s) AS v({columns}) WHERE t.{quote(str(pk.column))} = v.{keys[-1]}"
    )
    encoders = [_document_value(field, connection) for field in fields]
    document = [
        {
            **{key: encode(values[name]) for key, name, encode in zip(keys, names, encoders, strict=False)},
            keys[-1]: pk_value,
        }
        for pk_value, values in rows.items()
    ]
    connection.ensure_connection()
    with connection.wrap_database_errors, psycopg.Cursor(connection.connection) as cursor:
        cursor.execute(sql, [Jsonb(document, dumps=_document_json)])


def _document_value(field: Field, connection) -> Callable[[Any], Any]:
    """How one of ``field``'s values goes into the chunk's JSON document so that its column
    gets what the ORM would store: a JSON column's value nested as it is (what its own
    ``json.dumps`` would have sent; none of ours has a custom encoder), a plain value as it
    is (a float that is not finite as the text Postgres reads it from: JSON has no such
    number), anything else as its field prepares it (a decimal, a time: as text, _json_text)."""
    if isinstance(field, models.JSONField):
        if field.encoder is not None:  # none of ours has one: its values would need it here
            raise TypeError(f"{field.name}: a bulk update nests JSON values as json.dumps writes them")
        return _as_given
    if type(field) is models.DateTimeField:
        # An aware time is what the field's preparation hands Postgres unchanged.
        return lambda value: (
            value
            if type(value) is datetime.datetime and value.tzinfo is not None
            else field.get_db_prep_save(value, connection)
        )
    prepare = _preparer(field, connection)
    if float in _as_is(field):
        return lambda value: _finite_or_text(prepare(value))
    return prepare


def _document_json(document: Any) -> bytes | str:
    """A chunk's document as JSON (prbench.json_bytes): orjson, or json.dumps where it refuses."""
    return json_bytes(document, default=_json_text)


def _as_given(value: Any) -> Any:
    return value


def _finite_or_text(value: float | None) -> float | str | None:
    """A float column's prepared value; infinities and NaN as float8's text."""
    if value is None or math.isfinite(value):
        return value
    return str(value).replace("inf", "Infinity").replace("nan", "NaN")


def _json_text(value: Any) -> str:
    """A prepared value JSON has no type for, as the text its column reads: a time in ISO 8601
    with its offset, a decimal or a UUID as it prints."""
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, (decimal.Decimal, uuid.UUID)):
        return str(value)
    raise TypeError(f"cannot write a {type(value).__name__} into a bulk update")


def _value_type(field: Field, connection) -> str:
    """The column's type without a length: a cast to varchar(200) would cut a longer value
    silently, where the assignment refuses it (DataError), as the ORM's write would."""
    db_type = str(field.cast_db_type(connection))
    return db_type.split("(")[0] if db_type.startswith(("varchar", "character varying")) else db_type


def insert_rows(model: type[Model], rows: list[dict]) -> None:
    """Insert rows keyed by attribute name (``run_id``, not ``run``), the primary key left
    to the database; a field a row does not set gets its default, as ``Model()`` would.

    Postgres gets COPY: it runs each row of an executemany as its own statement, and a
    multi-row VALUES of thousands of rows costs psycopg more to bind than to send. SQLite
    runs an executemany as fast as anything.
    """
    if not rows:
        return
    connection = connections[router.db_for_write(model)]
    fields = [field for field in model._meta.concrete_fields if not field.primary_key]
    preparers = [_preparer(field, connection) for field in fields]
    values = [
        _prepared(preparers, [row[field.attname] if field.attname in row else field.get_default() for field in fields])
        for row in rows
    ]
    quote = connection.ops.quote_name
    table, columns = quote(model._meta.db_table), ", ".join(quote(str(field.column)) for field in fields)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            with cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
                for row_values in values:
                    copy.write_row(row_values)
        else:
            placeholders = ", ".join(["%s"] * len(fields))
            cursor.executemany(f"INSERT INTO {table} ({columns}) VALUES ({placeholders})", values)


def _fields(model: type[Model], names: list[str]) -> list[Field]:
    return [cast(Field, model._meta.get_field(name)) for name in names]


def _prepared(preparers: list[Callable[[Any], Any]], values: list) -> list:
    """Each value as its field stores it (``preparers``: each field's ``_preparer``)."""
    return [prepare(value) for prepare, value in zip(preparers, values, strict=True)]


def _preparer(field: Field, connection) -> Callable[[Any], Any]:
    """How ``field`` prepares a value to store: a plain value (_PLAIN) as it is, any other
    through the field's own ``get_db_prep_save``."""
    as_is = _as_is(field)
    return lambda value: value if type(value) in as_is else field.get_db_prep_save(value, connection)


# The value types each plain field stores exactly as given: its own preparation is int(),
# bool() or str() of the value and the database driver takes the result as it is. Asking the
# field for each value of a chunk was a tenth of a worker's CPU (issue 31). Exact field
# classes only: a subclass (an encrypted text, say) may prepare its values its own way; and
# exact value types, so a bool bound for an integer column still goes through int().
_PLAIN: dict[type[Field], tuple[type, ...]] = {
    models.AutoField: (int,),
    models.BigAutoField: (int,),
    models.IntegerField: (int,),
    models.BigIntegerField: (int,),
    models.SmallIntegerField: (int,),
    models.PositiveIntegerField: (int,),
    models.PositiveSmallIntegerField: (int,),
    models.PositiveBigIntegerField: (int,),
    models.BooleanField: (bool,),
    models.CharField: (str,),
    models.TextField: (str,),
    models.FloatField: (float,),
}


def _as_is(field: Field) -> tuple[type, ...]:
    """The value types ``field`` stores unprepared (None among them): those of its own class,
    or of the field a foreign key points to."""
    target = field.target_field if type(field) is models.ForeignKey else field
    plain = _PLAIN.get(type(target))
    return (*plain, type(None)) if plain else ()
