"""qa_exact: reading a response out of a model's output and grading it in each mode, with the
issue's examples ("(Dwyane) Wade", "the hare (jackrabbit)", "4" and "four", "What is ...")."""

import json
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evaluation.workloads import workload_for
from evaluation.workloads.answer_matching import MODES, basic_form, extract_response, grade, jeopardy_form, numerals
from evaluation.workloads.base import Context

QA = workload_for("qa_exact")


def task(answer, aliases=None, external_id="j-1"):
    payload = {"answer": answer} | ({"aliases": aliases} if aliases else {})
    return SimpleNamespace(payload=payload, external_id=external_id, problem_statement="a clue")


def verdict(output, answer, mode, aliases=None):
    evaluation = QA.evaluate(task(answer, aliases), output, Context(grading={"grading": mode}))
    return evaluation.correct, json.loads(evaluation.artifacts[0].content)


@pytest.mark.parametrize(
    "output, response",
    [
        ("What is Paris?", "Paris"),
        ("Who are the Beatles?", "the Beatles"),
        ("what's espresso", "espresso"),
        ("Let me think. The clue mentions Miami.\nAnswer: Who is Dwyane Wade?", "Dwyane Wade"),
        ("**Final answer:** What is the hare?", "the hare"),
        ("The answer is: Kyiv.", "Kyiv"),
        ("I believe it is Ohm's law, since V = IR.\nWhat is Ohm's law?", "Ohm's law"),
        ("", ""),
    ],
)
def test_the_response_is_read_out_of_its_phrasing(output, response):
    assert extract_response(output) == response


def test_only_the_first_question_phrasing_is_taken_off():
    # The title starts with "Who's": the phrasing around it goes, the title stays whole.
    assert extract_response("What is Who's Afraid of Virginia Woolf?") == "Who's Afraid of Virginia Woolf"


@pytest.mark.parametrize(
    "response, expected",
    [
        ("Wade", "(Dwyane) Wade"),
        ("Dwyane Wade", "(Dwyane) Wade"),
        ("hare", "the hare (jackrabbit)"),
        ("a jackrabbit", "the hare (jackrabbit)"),
        ("the hare jackrabbit", "the hare (jackrabbit)"),
        ("four", "4"),
        ("4", "four"),
        ("Kiev", "Kyiv (or Kiev)"),
        ("War of Eighteen Twelve", "the War of 1812"),
        ("Henry the Eighth", "Henry VIII (Henry the 8th)"),
        ("the twenty-first century", "21st century"),
        ("The The", "The The"),
        ("Ohms Law", "Ohm's law"),
        ("Abraham Lincon", "Abraham Lincoln"),  # a typo in a longer name
    ],
)
def test_jeopardy_mode_accepts_what_a_judge_would(response, expected):
    assert grade(response, [expected], "jeopardy").correct


@pytest.mark.parametrize(
    "response, expected",
    [
        ("Dwyane", "(Dwyane) Wade"),  # the optional part alone is not the answer
        ("Wide", "Wade"),  # short names must match exactly
        ("five", "4"),
        ("the War of 1813", "the War of 1812"),  # numbers must match, however similar the rest
        ("World War One", "World War Two"),
        ("the hare", "the tortoise"),
        ("", "Paris"),
    ],
)
def test_jeopardy_mode_refuses_near_misses(response, expected):
    assert not grade(response, [expected], "jeopardy").correct


def test_strict_mode_is_exact_up_to_case_accents_and_punctuation():
    assert grade("PARIS!", ["Paris"], "strict").correct
    assert grade("Ohms law", ["Ohm's Law"], "strict").correct
    assert grade("Francois Truffaut", ["François Truffaut"], "strict").correct
    assert grade("USA", ["U.S.A."], "strict").correct
    assert not grade("Paris France", ["Paris"], "strict").correct
    assert not grade("the Eiffel Tower", ["Eiffel Tower"], "strict").correct  # articles count here
    assert not grade("4", ["four"], "strict").correct
    assert not grade("Abraham Lincon", ["Abraham Lincoln"], "strict").correct


def test_lenient_mode_takes_anything_similar_enough():
    assert grade("Abraham Lincon", ["Abraham Lincoln"], "lenient").correct
    assert grade("Dwayne Wade", ["Dwyane Wade"], "lenient").correct
    assert grade("World War One", ["World War Two"], "lenient").correct  # lenient is lenient
    assert not grade("Wide", ["Wade"], "lenient").correct
    assert not grade("London", ["Paris"], "lenient").correct


def test_adaptive_mode_is_exact_for_numbers_and_short_names_and_fuzzy_for_long_phrases():
    assert not grade("1813", ["1812"], "adaptive").correct
    assert not grade("Dwayne Wade", ["Dwyane Wade"], "adaptive").correct  # a short name
    assert grade("Abraham Lincon", ["Abraham Lincoln"], "adaptive").correct  # medium: 0.9
    long = "the Treaty of Guadalupe Hidalgo"
    assert grade("treaty of guadelupe hidalgo", [long], "adaptive").correct
    assert not grade(f"{long} 1848", [f"{long} 1847"], "adaptive").correct
    assert not grade("World War One", ["World War Two"], "adaptive").correct  # number words are numbers


def test_aliases_are_answers_too():
    assert grade("Holland", ["the Netherlands", "Holland"], "strict").correct
    assert not grade("Belgium", ["the Netherlands", "Holland"], "jeopardy").correct


def test_each_verdict_records_its_mode_forms_and_similarity():
    correct, detail = verdict("Answer: What is a jackrabbit?", "the hare (jackrabbit)", "jeopardy")
    assert correct is True
    assert detail["mode"] == "jeopardy" and detail["response"] == "a jackrabbit"
    assert detail["response_forms"] == ["jackrabbit"] and detail["matched"] == "jackrabbit"
    assert set(detail["expected_forms"]) == {"hare jackrabbit", "hare", "jackrabbit"}
    assert detail["similarity"] == 1.0 and detail["expected"] == ["the hare (jackrabbit)"]
    correct, detail = verdict("What is Abraham Lincon?", "Abraham Lincoln", "adaptive")
    assert correct is True and detail["answer_type"] == "medium" and detail["threshold"] == 0.9
    assert 0.9 < detail["similarity"] < 1
    correct, detail = verdict("What is Lincon?", "Abraham Lincoln", "strict")
    assert correct is False and detail["mode"] == "strict" and detail["similarity"] < 1


def test_the_mode_defaults_to_jeopardy_and_an_inference_only_run_grades_nothing():
    evaluation = QA.evaluate(task("(Dwyane) Wade"), "Who is Wade?", Context())
    assert evaluation.correct is True and evaluation.score == 1.0
    assert json.loads(evaluation.artifacts[0].content)["mode"] == "jeopardy"
    ungraded = QA.evaluate(task("(Dwyane) Wade"), "Who is Wade?", Context(inference_only=True))
    assert ungraded.correct is None and ungraded.score is None and ungraded.answer == "Wade"


def test_normal_forms():
    assert basic_form("  Ça  va, U.S.A.!  ") == "ca va usa"
    assert basic_form("1,000 & 3.14") == "1000 and 3.14"
    assert numerals("one hundred and five") == "105"
    assert numerals("twenty one guns") == "21 guns"
    assert numerals("the fourth of july") == "the 4th of july"
    assert numerals("second base") == "second base"  # "second" alone is also a unit of time
    assert jeopardy_form("The Beatles") == "beatles"


def test_a_payload_needs_an_answer_with_a_letter_or_digit():
    assert QA.payload_errors({"answer": "Paris", "aliases": ["Paree"]}) == []
    assert QA.payload_errors({"answer": "?!"}) == ["answer: must be text with a letter or a digit in it"]
    assert QA.payload_errors({}) == ["answer: must be text with a letter or a digit in it"]
    assert QA.payload_errors({"answer": "x", "aliases": "y"}) == ["aliases: must be a list of at most 50 answers"]
    assert QA.payload_errors({"answer": "x", "aliases": ["ok", ""]}) == [
        "aliases[1]: must be text with a letter or a digit in it"
    ]


ANSWERS = st.text(st.characters(codec="utf-8", categories=("L", "N", "P", "Zs", "S")), min_size=1, max_size=40).filter(
    lambda text: any(c.isalnum() for c in text)
)


@settings(max_examples=300, deadline=None)
@given(answer=ANSWERS, external_id=st.text(min_size=1, max_size=10))
def test_the_reference_output_scores_1_and_every_distractor_0_in_every_mode(answer, external_id):
    """What the mock answers: its oracle must be right, its wrong answers wrong, whatever the
    expected answer and the run's mode."""
    clue = task(answer, external_id=external_id)
    for mode in MODES:
        context = Context(grading={"grading": mode})
        assert QA.evaluate(clue, QA.reference_output(clue), context).correct, mode
        distractors = QA.distractors(clue)
        assert distractors
        assert not any(QA.evaluate(clue, wrong, context).correct for wrong in distractors), mode


def test_distractors_leave_out_what_would_be_right():
    clue = task("the Pacific Ocean")
    assert "What is the Pacific Ocean?" not in QA.distractors(clue)
    assert QA.distractors(clue) == QA.distractors(task("the Pacific Ocean"))  # the same every time


# --- the jeopardy mode's conventions (tests/data/grading/README.md), each with its hard negatives ---


def judged(output, answer, clue="a clue", aliases=None):
    """The jeopardy mode's verdict on a model's output, through the kind, as a run grades it."""
    payload = {"answer": answer, "aliases": aliases or []}
    clue_task = SimpleNamespace(payload=payload, external_id="j", problem_statement=clue)
    evaluation = QA.evaluate(clue_task, output, Context(grading={"grading": "jeopardy"}))
    return evaluation.correct, json.loads(evaluation.artifacts[0].content)


@pytest.mark.parametrize(
    "output, answer",
    [
        ("What is the Nile River?", "the Nile"),
        ("Melville", "Herman Melville"),
        ("What is the RMS Titanic?", "Titanic"),
        ("Everest", "Mount Everest"),
    ],
)
def test_the_answer_keys_examples_that_jeopardy_mode_refused(output, answer):
    assert judged(output, answer)[0] is True


PRESIDENT = "He led the nation through the Great Depression with his New Deal"
SON = "The son of a president, he was chosen by the House of Representatives in 1825"
POET = "This Romantic poet drowned off the coast of Italy in 1822, a month before his 30th birthday"


def test_a_surname_suffices_unless_another_well_known_person_has_it():
    correct, detail = judged("Who is Melville?", "Herman Melville", "This author sent Ishmael to sea")
    assert correct is True and detail["reason"] == "a person's surname"
    assert judged("Who is Shelley?", "Percy Bysshe Shelley", POET)[0] is True
    assert judged("Van Gogh", "Vincent van Gogh", "This Dutch painter cut off part of his own ear")[0] is True
    assert judged("Who is Madame Curie?", "Marie Curie", "This Polish-born physicist won two Nobel Prizes")[0]
    correct, detail = judged("Who is Roosevelt?", "Franklin Delano Roosevelt", PRESIDENT, ["FDR"])
    assert correct is False and detail["reason"] == "ambiguous: more than one well-known Roosevelt"
    assert judged("Who is Adams?", "John Quincy Adams", SON)[0] is False
    assert judged("Who is FDR?", "Franklin Delano Roosevelt", PRESIDENT, ["FDR"])[0] is True


def test_fewer_or_other_given_names_are_fine_but_a_namesake_is_another_person():
    assert judged("Who is Percy Shelley?", "Percy Bysshe Shelley", POET)[0] is True
    assert judged("John Q. Adams", "John Quincy Adams", SON)[0] is True
    assert judged("J.S. Bach", "Johann Sebastian Bach", "This composer of the Brandenburg Concertos")[0] is True
    assert judged("Who is Elvis Aaron Presley?", "Elvis Presley", "He died at Graceland in 1977")[0] is True
    correct, detail = judged("Who is Mary Shelley?", "Percy Bysshe Shelley", POET)
    assert correct is False and detail["reason"] == "names another person: Mary Shelley"
    assert judged("Who is John Adams?", "John Quincy Adams", SON)[0] is False
    cia = "Before he became the 41st president, he headed the CIA"
    assert judged("George W. Bush", "George H. W. Bush", cia)[0] is False
    assert judged("Alexandre Dumas fils", "Alexandre Dumas (père)", "He wrote The Three Musketeers")[0] is False


def test_a_place_is_not_a_person_whose_surname_would_do():
    assert judged("What is Virginia?", "West Virginia", "Charleston is the capital of this state")[0] is False
    assert judged("Korea", "North Korea", "Pyongyang is the capital of this country")[0] is False
    assert judged("Aires", "Buenos Aires", "This capital's name means good airs")[0] is False


def test_generic_heads_ship_prefixes_and_titles_are_optional():
    assert judged("Superior", "Lake Superior")[0] is True
    assert judged("What is the Pacific?", "the Pacific Ocean")[0] is True
    assert judged("Rio Grande River", "the Rio Grande")[0] is True
    assert judged("What is the H.M.S. Beagle?", "the Beagle")[0] is True
    assert judged("Who is King Henry VIII?", "Henry VIII")[0] is True
    assert judged("Who is Doctor Watson?", "(Dr. John) Watson")[0] is True
    assert judged("What is Apple Inc.?", "Apple (Computer)")[0] is True
    assert judged("What is Victoria Falls?", "Lake Victoria")[0] is False
    assert judged("What is the Blue Nile?", "the Nile")[0] is False
    # A title is optional before a name, never on both sides: these are two penguins.
    assert judged("What is the king penguin?", "the emperor penguin", "the largest species of penguin")[0] is False


def test_singular_and_plural_are_one_answer():
    assert judged("What is a Cyclops?", "the Cyclopes")[0] is True
    assert judged("bats", "the bat")[0] is True
    assert judged("What are the Titans?", "the Cyclopes")[0] is False


@pytest.mark.parametrize(
    "output, answer, correct",
    [
        ("Henry the Eighth", "Henry VIII", True),
        ("Who is Henry VII?", "Henry VIII", False),
        ("nineteen oh five", "1905", True),
        ("1915", "1905", False),
        ("a hundred", "100", True),
        ("What is the 100 Years War?", "the Hundred Years' War", True),
        ("the Thirty Years' War", "the Hundred Years' War", False),
        ("Who is Napoleon III?", "Napoleon (Bonaparte)", False),
        ("212°F", "212", True),
    ],
)
def test_numbers_as_digits_words_or_roman_numerals(output, answer, correct):
    assert judged(output, answer)[0] is correct


@pytest.mark.parametrize(
    "output, answer, correct",
    [
        ("4 July 1776", "July 4, 1776", True),
        ("7/4/1776", "July 4, 1776", True),
        ("the Fourth of July, 1776", "July 4, 1776", True),
        ("Dec. 7, 1941", "December 7, 1941", True),
        ("6/6/44", "June 6, 1944", True),
        ("July 2, 1776", "July 4, 1776", False),
        ("What is July 4, 1766?", "July 4, 1776", False),
        ("What is 1941?", "December 7, 1941", False),
    ],
)
def test_dates_in_any_common_form(output, answer, correct):
    correct_now, detail = judged(output, answer)
    assert correct_now is correct
    if output[0].isalpha() and "1941?" not in output:
        assert detail["reason"] == ("the same date" if correct else "another date")


@pytest.mark.parametrize(
    "output, answer, correct",
    [
        ("What is Canbera?", "Canberra", True),
        ("Mozarella", "mozzarella", True),
        ("Who is Melvile?", "Herman Melville", True),
        ("What is Bueno Aires?", "Buenos Aires", True),
        ("What is Russia?", "Prussia", False),  # one letter, but another country
        ("Who is Tyler?", "Zachary Taylor", False),  # one letter, but another president
        ("What is the Britannic?", "Titanic", False),
    ],
)
def test_a_misspelling_that_does_not_change_the_answer(output, answer, correct):
    assert judged(output, answer)[0] is correct


def test_true_extra_words_and_explanations_but_never_two_answers():
    assert judged("Everest, the tallest mountain", "Mount Everest")[0] is True
    assert judged("Buenos Aires, Argentina", "Buenos Aires")[0] is True
    assert judged("Titanic, which sank after hitting an iceberg", "Titanic")[0] is True
    assert judged("Who is Neil Armstrong? He stepped off the Eagle in 1969.", "Neil Armstrong")[0] is True
    players = "It's the number of players a baseball team has on the field at once"
    correct, detail = judged("9 players", "nine", players)
    assert correct is True and detail["reason"] == "the same answer, with or without the clue's own words"
    rhodes = "This bronze statue of the sun god Helios stood at the harbor of Rhodes"
    assert judged("the Colossus", "the Colossus of Rhodes", rhodes)[0] is True
    assert judged("What is Alaska or Texas?", "Alaska")[0] is False
    assert judged("Who is Van Gogh? Or possibly Gauguin.", "Vincent van Gogh", "This Dutch painter")[0] is False
    assert judged("Alaska, or maybe Texas", "Alaska")[0] is False
    assert judged("What is Oz?", "The Wizard of Oz", "A tornado carries Dorothy off to Oz")[0] is False


@pytest.mark.parametrize(
    "output, response",
    [
        ("I believe it's Mount Everest", "Mount Everest"),
        ("I think this is Thomas Edison.", "Thomas Edison"),
        ("Probably 13.", "13"),
        ("It's Jonah!", "Jonah"),
        ("Who is Herman Melville?\n\nHe published Moby-Dick in 1851; Ishmael narrates it.", "Herman Melville"),
        ("Who is Neil Armstrong? He stepped off the Eagle.", "Neil Armstrong"),
        ("Who is Van Gogh? Or possibly Gauguin.", "Van Gogh? Or possibly Gauguin"),  # kept whole: two answers
    ],
)
def test_hedges_and_explanations_are_read_past(output, response):
    assert extract_response(output) == response


def test_strict_mode_takes_none_of_the_judges_conventions():
    assert not grade("Nile River", ["the Nile"], "strict").correct
    assert not grade("Melville", ["Herman Melville"], "strict").correct
    assert not grade("RMS Titanic", ["Titanic"], "strict").correct
    assert grade(extract_response("I believe it's Mount Everest"), ["Mount Everest"], "strict").correct
