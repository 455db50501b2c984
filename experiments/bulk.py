"""Bulk writes for the attempt pipeline's hot path.

``bulk_update`` builds a CASE per field per row and ``bulk_create`` prepares and compiles
every value of every object: on a latency-bound run that Python cost, not the database,
was most of an attempt's overhead. These helpers build each statement once. Values still
go through each field's own ``get_db_prep_save``, so JSON, decimals and times are stored
exactly as the ORM would store them. No signals are sent and no ``auto_now`` fields are
filled: callers pass those values themselves.
"""

from __future__ import annotations

from typing import cast

from django.db import connections, router
from django.db.models import Field, Model


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
    quote = connection.ops.quote_name
    assignments = ", ".join(f"{quote(str(field.column))} = %s" for field in fields)
    pk_column = quote(str(cast(Field, model._meta.pk).column))
    sql = f"UPDATE {quote(model._meta.db_table)} SET {assignments} WHERE {pk_column} = %s"
    params = [[*_prepared(fields, names, values, connection), pk] for pk, values in rows.items()]
    with connection.cursor() as cursor:
        cursor.executemany(sql, params)


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
    values = [
        [
            field.get_db_prep_save(row[field.attname] if field.attname in row else field.get_default(), connection)
            for field in fields
        ]
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


def _prepared(fields: list[Field], names: list[str], values: dict, connection) -> list:
    return [field.get_db_prep_save(values[name], connection) for name, field in zip(names, fields, strict=True)]
