"""Sketches stored as integer[] subscripted by bucket on Postgres (leaderboards/sketches.py
SketchField), added to in place by prbench_add_buckets: a fold rewrote each of its arms' JSON
sketches whole, hundreds of keys and a TOAST value each, for the few buckets a chunk adds.
The zero bucket moves from -1,000,000 to -700 (an array spans its lowest bucket to its
highest). Rows hold their sketches inline up to a page (toast_tuple_target): a few kilobytes."""

import json

from django.db import migrations

import leaderboards.sketches

SKETCHES = ("latency_sketch", "first_token_sketch", "tokens_per_s_sketch")
OLD_ZERO, NEW_ZERO = "-1000000", "-700"

# Counts added bucket by bucket (more's non-NULL elements into total's, which grows to take
# them), and a chunk's buckets counted: plpgsql assigns to an array element in place.
FUNCTIONS = """
CREATE OR REPLACE FUNCTION prbench_add_buckets(total integer[], more integer[]) RETURNS integer[]
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE bucket integer;
BEGIN
    IF more IS NULL OR cardinality(more) = 0 THEN
        RETURN coalesce(total, '{}');
    END IF;
    IF total IS NULL OR cardinality(total) = 0 THEN
        RETURN more;
    END IF;
    FOR bucket IN array_lower(more, 1) .. array_upper(more, 1) LOOP
        IF more[bucket] IS NOT NULL THEN
            total[bucket] := coalesce(total[bucket], 0) + more[bucket];
        END IF;
    END LOOP;
    RETURN total;
END $$;
CREATE OR REPLACE FUNCTION prbench_count_buckets(buckets integer[]) RETURNS integer[]
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE bucket integer; counts integer[] := '{}';
BEGIN
    FOREACH bucket IN ARRAY coalesce(buckets, '{}') LOOP
        IF bucket IS NOT NULL THEN
            counts[bucket] := coalesce(counts[bucket], 0) + 1;
        END IF;
    END LOOP;
    RETURN counts;
END $$;
CREATE OR REPLACE FUNCTION prbench_sketch_array(sketch jsonb) RETURNS integer[]
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE key text; count integer; counts integer[] := '{}';
BEGIN
    FOR key, count IN SELECT each.key, each.value::integer FROM jsonb_each_text(coalesce(sketch, '{}')) AS each LOOP
        IF count <> 0 THEN
            counts[CASE WHEN key = '-1000000' THEN -700 ELSE key::integer END] := count;
        END IF;
    END LOOP;
    RETURN counts;
END $$;
"""
TO_ARRAYS = ", ".join(
    f"ALTER COLUMN {name} TYPE integer[] USING prbench_sketch_array({name}), ALTER COLUMN {name} SET STORAGE EXTENDED"
    for name in SKETCHES
)
TO_JSON_FUNCTION = """
CREATE OR REPLACE FUNCTION prbench_sketch_json(sketch integer[]) RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
SELECT coalesce(jsonb_object_agg(CASE WHEN bucket = -700 THEN -1000000 ELSE bucket END, sketch[bucket]), '{}')
FROM generate_subscripts(sketch, 1) AS bucket WHERE sketch[bucket] IS NOT NULL
$$;
"""
TO_JSON = ", ".join(
    f"ALTER COLUMN {name} TYPE jsonb USING prbench_sketch_json({name}), ALTER COLUMN {name} SET STORAGE EXTERNAL"
    for name in SKETCHES
)


def to_arrays(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(FUNCTIONS)
        schema_editor.execute(f"ALTER TABLE leaderboards_armsummary {TO_ARRAYS}, SET (toast_tuple_target = 8160)")
        schema_editor.execute("DROP FUNCTION prbench_sketch_array(jsonb)")
    else:
        _renamed_zero(schema_editor, OLD_ZERO, NEW_ZERO)


def to_json(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(TO_JSON_FUNCTION)
        schema_editor.execute(f"ALTER TABLE leaderboards_armsummary {TO_JSON}, RESET (toast_tuple_target)")
        schema_editor.execute(
            "DROP FUNCTION prbench_sketch_json(integer[]); DROP FUNCTION prbench_add_buckets(integer[], integer[]); "
            "DROP FUNCTION prbench_count_buckets(integer[])"
        )
    else:
        _renamed_zero(schema_editor, NEW_ZERO, OLD_ZERO)


def _renamed_zero(schema_editor, old, new):
    """SQLite keeps its JSON objects: only the zero bucket's key changes."""
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(f"SELECT id, {', '.join(SKETCHES)} FROM leaderboards_armsummary")
        for pk, *values in cursor.fetchall():
            renamed = []
            for value in values:
                sketch = json.loads(value or "{}")
                if old in sketch:
                    sketch[new] = sketch.pop(old)
                renamed.append(json.dumps(sketch))
            assignments = ", ".join(f"{name} = %s" for name in SKETCHES)
            cursor.execute(f"UPDATE leaderboards_armsummary SET {assignments} WHERE id = %s", [*renamed, pk])


class Migration(migrations.Migration):

    dependencies = [
        ('leaderboards', '0008_sketches_stored_uncompressed'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name='armsummary',
                    name=name,
                    field=leaderboards.sketches.SketchField(default=dict, help_text=help_text),
                )
                for name, help_text in (
                    ('latency_sketch', 'Latency in ms: answers per log bucket'),
                    ('first_token_sketch', 'First token in ms: answers per log bucket'),
                    ('tokens_per_s_sketch', 'Output tokens/s: answers per log bucket'),
                )
            ],
            database_operations=[migrations.RunPython(to_arrays, to_json)],
        ),
    ]
