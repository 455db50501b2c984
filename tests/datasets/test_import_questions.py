"""`import_tasks --format jeopardy|mmlu|truthfulqa|jsonl|csv`: small files in each format
(escaped quotes, several files, field mappings), and broken files refused whole, naming file,
line and field."""

import json

import pytest
from django.core.management import CommandError

from datasets.models import Dataset, DatasetKind, TaskInstance
from tests.factories import import_file
from tests.samples import JEOPARDY, MMLU, TRUTHFULQA

HEADER = "round\tclue_value\tdaily_double_value\tcategory\tcomments\tanswer\tquestion\tair_date\tnotes"


def refused(org, fmt, path, *options, dataset="qa") -> str:
    with pytest.raises(CommandError) as caught:
        import_file(org, fmt, path, *options, dataset=dataset)
    assert not TaskInstance.objects.filter(dataset__org=org).exists()  # all or nothing
    return str(caught.value)


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


# --- Jeopardy --------------------------------------------------------------------------------------


def test_a_jeopardy_tsv_imports_clue_as_question_and_response_as_answer(org):
    out = import_file(org, "jeopardy", JEOPARDY)
    assert "Created dataset 'qa' (Question and answer (Jeopardy style)): 10 task(s)" in out
    dataset = Dataset.objects.get(org=org, name="qa")
    assert dataset.kind == DatasetKind.QA_EXACT
    wade = dataset.tasks.get(payload__answer="(Dwyane) Wade")
    assert wade.problem_statement == "This Miami Heat guard was the 2006 NBA Finals MVP"
    assert (wade.category, wade.difficulty, wade.title) == ("BASKETBALL", "200", "BASKETBALL · $200")
    assert wade.metadata == {"round": "1", "clue_value": "200", "daily_double_value": "0", "air_date": "2019-03-04"}
    # Escaped quotes come back as quotes, in the clue and in the comments.
    hare = dataset.tasks.get(payload__answer="the hare (jackrabbit)")
    assert hare.problem_statement == 'Despite its name, this "rabbit" of the American West is really one of these'
    albee = dataset.tasks.get(payload__answer="Virginia Woolf")
    assert albee.problem_statement == 'Edward Albee asked, "Who\'s Afraid of" this author?'
    assert albee.metadata["comments"] == "(Alex: Titles, please.)" and albee.metadata["daily_double_value"] == "1200"
    final = dataset.tasks.get(payload__answer="Grover Cleveland")
    assert (final.difficulty, final.title) == ("final", "PRESIDENTS · Final Jeopardy!")
    assert list(dataset.tasks.values_list("position", flat=True)) == list(range(10))


def test_jeopardy_ids_are_the_same_on_every_import_so_a_reimport_is_refused(org):
    import_file(org, "jeopardy", JEOPARDY)
    ids = set(TaskInstance.objects.values_list("external_id", flat=True))
    assert len(ids) == 10 and all(i.startswith("jeopardy-") for i in ids)
    with pytest.raises(CommandError) as caught:
        import_file(org, "jeopardy", JEOPARDY)
    assert "jeopardy_sample.tsv:2: field instance_id:" in str(caught.value)
    assert "is already in dataset 'qa'" in str(caught.value)
    assert TaskInstance.objects.count() == 10


def test_a_broken_jeopardy_file_is_refused_with_each_line_and_field(org, tmp_path):
    lines = JEOPARDY.read_text().splitlines()
    broken = [
        lines[0],
        lines[1],
        "1\t200\t0\tSHORT ROW\tonly five fields",
        "1\t400\t0\tNO RESPONSE\t\tA clue with no response\t\t2019-03-04\t",
        "1\tlots\t0\tMONEY\t\tA clue\tan answer\t2019-03-04\t",
        "1\t600\t0\tPUNCTUATION\t\tA clue\t?!\t2019-03-04\t",
        lines[1],  # the same clue again
    ]
    message = refused(org, "jeopardy", write(tmp_path, "clues.tsv", "\n".join(broken) + "\n"))
    assert "clues.tsv:3: 5 tab-separated fields; the header has 9" in message
    assert "clues.tsv:4: field question: empty" in message
    assert "clues.tsv:5: field clue_value: 'lots' is not an amount" in message
    assert "clues.tsv:6: field question: must be text with a letter or a digit in it" in message
    assert "clues.tsv:7: the same clue 'jeopardy-" in message and "already appears on line 2" in message


def test_a_jeopardy_file_without_its_header_is_refused(org, tmp_path):
    lines = JEOPARDY.read_text().splitlines()
    message = refused(org, "jeopardy", write(tmp_path, "clues.tsv", "\n".join(lines[1:])))
    assert "clues.tsv:1: must be the header (round, clue_value," in message and "missing: answer, question" in message


def test_a_file_that_is_not_utf8_names_its_line(org, tmp_path):
    path = tmp_path / "clues.tsv"
    path.write_bytes(f"{HEADER}\n1\t200\t0\tX\t\tA clue \xff\tanswer\t2019\t\n".encode("latin-1"))
    assert "clues.tsv:2: not valid UTF-8" in refused(org, "jeopardy", path)


def test_a_published_format_refuses_a_mapping_or_another_kind(org):
    assert "--map is for jsonl and csv files" in refused(org, "jeopardy", JEOPARDY, "--map", "question=clue")
    assert "this format's tasks are qa_exact, not multiple_choice" in refused(
        org, "jeopardy", JEOPARDY, "--kind", "multiple_choice"
    )


# --- MMLU ----------------------------------------------------------------------------------------------


def test_an_mmlu_file_imports_with_its_subject_as_category(org):
    out = import_file(org, "mmlu", MMLU / "abstract_algebra_dev.csv")
    assert "Created dataset 'qa' (Multiple choice): 5 task(s)" in out
    first = TaskInstance.objects.get(external_id="abstract_algebra_dev-1")
    assert first.problem_statement == "Find all c in Z_3 such that Z_3[x]/(x^2 + c) is a field."
    assert first.payload == {"choices": ["0", "1", "2", "3"], "answer": "B"}
    assert first.category == "abstract_algebra"
    assert first.metadata == {"subject": "abstract_algebra", "split": "dev"}
    second = TaskInstance.objects.get(external_id="abstract_algebra_dev-2")  # quoted fields with commas
    assert second.payload["choices"][0] == "True, True"


def test_an_mmlu_directory_imports_every_file_in_name_order(org):
    out = import_file(org, "mmlu", MMLU)
    total = 5 + 5 + 5 + sum(1 for _ in (MMLU / "elementary_mathematics_val.csv").open())  # no quoted newlines there
    assert f"{total} task(s)" in out
    assert set(TaskInstance.objects.values_list("category", flat=True)) == {
        "abstract_algebra",
        "elementary_mathematics",
        "high_school_biology",
        "world_religions",
    }
    assert TaskInstance.objects.order_by("position").first().external_id == "abstract_algebra_dev-1"


def test_a_broken_mmlu_file_is_refused_and_so_is_the_directory_holding_it(org, tmp_path):
    good = (MMLU / "abstract_algebra_dev.csv").read_text()
    write(tmp_path, "anatomy_dev.csv", good)
    write(
        tmp_path,
        "astronomy_dev.csv",
        'What is a star?,A ball of gas,A planet,,A moon,A\nHow far is it?,1,2,3,4,E\n"Too few",1,2,C\n',
    )
    message = refused(org, "mmlu", tmp_path)
    assert "astronomy_dev.csv:1: field C: empty" in message
    assert "astronomy_dev.csv:2: field answer: 'E' is not one of A, B, C, D" in message
    assert "astronomy_dev.csv:3: 4 fields; expected 6 (question, A, B, C, D, answer)" in message
    assert "anatomy_dev.csv" not in message


def test_two_files_with_the_same_task_ids_are_refused(org, tmp_path):
    (tmp_path / "a").mkdir()
    write(tmp_path / "a", "algebra.jsonl", '{"id": "q1", "question": "1+1?", "answer": "2"}\n')
    write(tmp_path / "a", "more.jsonl", '{"id": "q1", "question": "2+2?", "answer": "4"}\n')
    message = refused(org, "jsonl", tmp_path / "a", "--kind", "qa_exact")
    assert "more.jsonl:1: id 'q1' is also on algebra.jsonl:1" in message


# --- TruthfulQA ----------------------------------------------------------------------------------------


def test_truthfulqa_imports_as_mc1_with_the_best_answer_among_the_incorrect_ones(org):
    out = import_file(org, "truthfulqa", TRUTHFULQA)
    assert "(Multiple choice): 5 task(s)" in out
    gum = TaskInstance.objects.get(problem_statement="What happens if you swallow chewing gum?")
    payload = gum.payload
    assert sorted(payload["choices"]) == sorted(
        [
            "It passes through your digestive system",
            "It stays in your stomach for seven years",
            "It sticks to your intestines",
            "You will die",
        ]
    )
    assert payload["choices"][ord(payload["answer"]) - ord("A")] == payload["best_answer"]
    assert payload["best_answer"] == "It passes through your digestive system"
    # The lists as published, for the generation (free text) kind to reuse.
    assert payload["correct_answers"] == [
        "It passes through your digestive system",
        "Nothing much happens",
        "It is excreted",
    ]
    assert payload["incorrect_answers"][0] == "It stays in your stomach for seven years"
    assert (gum.category, gum.metadata) == (
        "Misconceptions",
        {"type": "Adversarial", "source": "https://example.org/gum"},
    )
    cold = TaskInstance.objects.get(external_id__startswith="truthfulqa-", category="Health")
    assert '"just"' in cold.problem_statement  # doubled quotes in a quoted CSV field


def test_truthfulqa_orders_the_options_the_same_way_on_every_import_and_not_always_first(org):
    import_file(org, "truthfulqa", TRUTHFULQA, dataset="one")
    import_file(org, "truthfulqa", TRUTHFULQA, dataset="two")
    first = dict(TaskInstance.objects.filter(dataset__name="one").values_list("external_id", "payload"))
    second = dict(TaskInstance.objects.filter(dataset__name="two").values_list("external_id", "payload"))
    assert first == second
    assert len({payload["answer"] for payload in first.values()}) > 1


def test_a_broken_truthfulqa_file_names_line_and_column(org, tmp_path):
    lines = TRUTHFULQA.read_text().splitlines()
    broken = [
        lines[0],
        "Adversarial,Misc,,Best,Best,Wrong,src",
        "Adversarial,Misc,Is it?,Yes,Yes,Yes; No,src",
        "Adversarial,Misc,Is it not?,Yes,Yes,,src",
        "Adversarial,Misc,Short row,Yes",
        lines[1],
        lines[1],
    ]
    message = refused(org, "truthfulqa", write(tmp_path, "TruthfulQA.csv", "\n".join(broken) + "\n"))
    assert "TruthfulQA.csv:2: field Question: empty" in message
    assert "TruthfulQA.csv:3: field Incorrect Answers: holds the best answer too" in message
    assert "TruthfulQA.csv:4: field Incorrect Answers: empty" in message
    assert "TruthfulQA.csv:5: 4 fields; the header has 7" in message
    assert "TruthfulQA.csv:7: the question 'truthfulqa-" in message and "already appears on line 6" in message


# --- generic JSONL and CSV -----------------------------------------------------------------------------


def test_jsonl_questions_with_a_field_mapping(org, tmp_path):
    rows = [
        {"prompt": "Largest planet?", "target": "Jupiter", "topic": "space", "level": 1, "alts": ["Jove"]},
        {"prompt": "Smallest planet?", "target": "Mercury", "topic": "space", "level": 2, "source": "book"},
    ]
    path = write(tmp_path, "planets.jsonl", "\n".join(json.dumps(row) for row in rows) + "\n")
    out = import_file(
        org, "jsonl", path, "--kind", "qa_exact",
        "--map", "question=prompt,answer=target,category=topic,difficulty=level,aliases=alts",
    )  # fmt: skip
    assert "Created dataset 'qa' (Question and answer (Jeopardy style)): 2 task(s)" in out
    jupiter = TaskInstance.objects.get(problem_statement="Largest planet?")
    assert jupiter.payload == {"answer": "Jupiter", "aliases": ["Jove"]}
    assert (jupiter.category, jupiter.difficulty, jupiter.title) == ("space", "1", "Largest planet?")
    assert jupiter.external_id.startswith("qa_exact-")  # no id field: a hash of question and answer
    mercury = TaskInstance.objects.get(problem_statement="Smallest planet?")
    assert mercury.metadata == {"source": "book"}  # what the mapping does not use is kept


def test_jsonl_multiple_choice_with_a_list_and_an_index_answer(org, tmp_path):
    rows = [
        {"id": "m1", "question": "2+2?", "choices": ["3", "4", "5"], "answer": 1},
        {"id": "m2", "question": "Sky?", "choices": ["blue", "green"], "answer": "a"},
        {"id": "m3", "question": "Grass?", "choices": ["blue", "green"], "answer": "green"},
    ]
    path = write(tmp_path, "mc.jsonl", "\n".join(json.dumps(row) for row in rows))
    import_file(org, "jsonl", path, "--kind", "multiple_choice")
    answers = dict(TaskInstance.objects.values_list("external_id", "payload__answer"))
    assert answers == {"m1": "B", "m2": "A", "m3": "B"}


def test_csv_multiple_choice_from_several_columns(org, tmp_path):
    text = (
        "qid,stem,opt1,opt2,opt3,opt4,key,subject\n"
        'q1,"Capital of France, the country?",Paris,Lyon,Nice,Lille,A,geo\n'
        "q2,Is water wet?,Yes,No,,,B,physics\n"  # two options: the empty trailing columns dropped
    )
    path = write(tmp_path, "quiz.csv", text)
    import_file(
        org, "csv", path, "--kind", "multiple_choice",
        "--map", "id=qid,question=stem,choices=opt1|opt2|opt3|opt4,answer=key,category=subject",
    )  # fmt: skip
    q1, q2 = TaskInstance.objects.order_by("position")
    assert (q1.external_id, q1.problem_statement) == ("q1", "Capital of France, the country?")
    assert q1.payload == {"choices": ["Paris", "Lyon", "Nice", "Lille"], "answer": "A"} and q1.category == "geo"
    assert q2.payload == {"choices": ["Yes", "No"], "answer": "B"}


def test_csv_qa_with_a_json_list_of_aliases_and_separated_ones(org, tmp_path):
    text = (
        'question,answer,aliases\nBig cat?,lion,"[""tiger"", ""leopard""]"\nOcean?,Pacific,Pacific Ocean; the Pacific\n'
    )
    import_file(org, "csv", write(tmp_path, "qa.csv", text), "--kind", "qa_exact")
    aliases = dict(TaskInstance.objects.values_list("payload__answer", "payload__aliases"))
    assert aliases == {"lion": ["tiger", "leopard"], "Pacific": ["Pacific Ocean", "the Pacific"]}


def test_a_generic_file_needs_a_kind_and_a_mapping_of_known_fields(org, tmp_path):
    path = write(tmp_path, "qa.jsonl", '{"question": "q", "answer": "a"}\n')
    assert "--kind must say what the tasks are: qa_exact or multiple_choice" in refused(org, "jsonl", path)
    assert "('code' is not one)" in refused(org, "jsonl", path, "--kind", "code")
    message = refused(org, "jsonl", path, "--kind", "qa_exact", "--map", "prompt=question,answer=a|b")
    assert "--map: 'prompt' is not a field of qa_exact tasks; they are id, question," in message
    assert "--map: only choices takes several columns (answer=a|b)" in message


def test_a_csv_without_a_mapped_column_names_the_columns_it_has(org, tmp_path):
    path = write(tmp_path, "qa.csv", "prompt,target\nq,a\n")
    message = refused(org, "csv", path, "--kind", "qa_exact")
    assert "qa.csv:1: no column 'question' for question (the columns are 'prompt', 'target'" in message
    assert "map another with --map question=COLUMN" in message


def test_broken_generic_rows_are_refused_with_line_and_field(org, tmp_path):
    lines = [
        '{"id": "ok", "question": "2+2?", "choices": ["3", "4"], "answer": "B"}',
        "not json",
        '["a", "list"]',
        '{"id": "no-question", "choices": ["3", "4"], "answer": "A"}',
        '{"id": "one-option", "question": "q", "choices": ["3"], "answer": "A"}',
        '{"id": "bad-answer", "question": "q", "choices": ["3", "4"], "answer": "Z"}',
        '{"id": "text-choices", "question": "q", "choices": "3, 4", "answer": "A"}',
        '{"id": "ok", "question": "again", "choices": ["3", "4"], "answer": "A"}',
        '{"id": "nul", "question": "q\\u0000", "choices": ["3", "4"], "answer": "A"}',
    ]
    message = refused(org, "jsonl", write(tmp_path, "mc.jsonl", "\n".join(lines)), "--kind", "multiple_choice")
    assert "mc.jsonl:2: not valid JSON:" in message
    assert "mc.jsonl:3: each line must be a JSON object" in message
    assert "mc.jsonl:4: field question: missing or empty" in message
    assert "mc.jsonl:5: field choices: must be a list of 2 to 26 options" in message
    assert "mc.jsonl:6: field answer: 'Z' is neither a letter from A to B nor one option's text" in message
    assert "mc.jsonl:7: field choices: must be a list (or map several columns" in message
    assert "mc.jsonl:8: id 'ok' already appears on line 1" in message
    assert "mc.jsonl:9: field question: contains a NUL character" in message


def test_a_csv_with_a_gap_between_options_is_refused(org, tmp_path):
    text = "q,a,b,c,key\nWhich?,x,,z,A\n"
    message = refused(
        org,
        "csv",
        write(tmp_path, "gap.csv", text),
        "--kind",
        "multiple_choice",
        "--map",
        "question=q,choices=a|b|c,answer=key",
    )
    assert "gap.csv:2: field b: empty, with options after it" in message


def test_questions_cannot_go_into_a_dataset_of_another_kind(org):
    import_file(org, "jeopardy", JEOPARDY)
    with pytest.raises(CommandError) as caught:
        import_file(org, "mmlu", MMLU / "abstract_algebra_dev.csv")
    assert "dataset 'qa' holds Question and answer (Jeopardy style) tasks; this file's are multiple_choice" in str(
        caught.value
    )
