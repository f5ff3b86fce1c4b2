"""The semantic layer of the offline screen, trained as the app trains it (the shipped
exemplar bank and the sample modules' words): risk recognised by meaning where no listed
phrase matches, in English and Vietnamese with and without diacritics; severity; evidence;
what it must not flag; and how an author's bank is checked."""

from __future__ import annotations

import hashlib

import pytest

from tutor.content.modules import load_library
from tutor.risk.offline import offline_screen
from tutor.risk.semantic import BankError, load_bank


@pytest.fixture(scope="module")
def semantic():
    layer = load_library().semantic
    assert layer is not None, "the semantic layer did not load (see the log)"
    return layer


def flags(text, config, semantic):
    return offline_screen(text, config, semantic)


# Written for these tests: none of them is in the exemplar bank or an evaluation set.
UNLISTED_PLANS = [
    "the tablets are lined up on my desk and once my flatmate leaves for work i'm swallowing every one",
    "minh da gom du thuoc ngu cua me roi, dem nay ca nha ngu het la minh uong",
    "Mình đã viết xong thư cho bố mẹ và em, để trên bàn học. Tối nay mình sẽ đi thật xa, không về nữa.",
]


@pytest.mark.parametrize("text", UNLISTED_PLANS)
def test_a_plan_in_words_no_phrase_lists_is_flagged_as_imminent_by_meaning(config, semantic, text):
    found = flags(text, config, semantic)
    assert found, text
    top = found[0]
    assert top.severity == "imminent" and "semantic" in top.source
    for evidence in top.evidence:  # the window that raised it, as offsets and a hash of the words
        assert evidence.sha256 == hashlib.sha256(text[evidence.start:evidence.end].encode()).hexdigest()


@pytest.mark.parametrize("text,label", [
    ("Mum threw a mug at my head again this morning and said I deserved it", "abuse"),
    ("my mate's been posting goodbye messages and isn't answering his phone, I'm scared he's done something", "concern_for_other"),
])
def test_other_labels_are_read_by_meaning_too(config, semantic, text, label):
    assert label in {f.label for f in flags(text, config, semantic)}, text


@pytest.mark.parametrize("text,labels", [
    # a plan for one's own life is not also a threat to others (threats share "tonight")
    ("I have my pills counted out and tonight I am going to take all of them", {"self_harm"}),
    ("I've counted the tablets out on my desk and I'll swallow the lot once everyone's asleep", {"self_harm"}),
    ("Tối nay cả nhà đi vắng, mình sẽ nuốt hết chỗ thuốc ngủ để dành", {"self_harm"}),
    # an overdose already taken is both
    ("swallowed the whole packet of paracetamol half an hour ago and now I'm being sick", {"self_harm", "medical_emergency"}),
])
def test_a_second_label_needs_exemplars_of_its_own_beside_the_message(config, semantic, text, labels):
    assert {f.label for f in flags(text, config, semantic)} == labels, text


@pytest.mark.parametrize("text", [
    "Continue", "Tonight", "Yes I will", "Tell me more",  # quick replies: too short to read
    "My grandad always beats me at cards and then laughs about it",
    "In the novel the captain writes farewell letters to his crew before the storm",
    "When my heart raced before the exam I was sure I would faint, but it passed",
    "Bố mình đánh cầu lông giỏi lắm, cuối tuần nào cũng thắng mình",
    "I'm off on holiday next week so I won't be around for the lessons, see you after!",
])
def test_look_alikes_and_quick_replies_are_ordinary(config, semantic, text):
    assert flags(text, config, semantic) == [], text


@pytest.mark.parametrize("text, crisis", [
    ("I've felt flat and teary all week and my friends are all busy", False),
    ("mấy hôm nay mình buồn và hay khóc, chắc tại áp lực thi cử", False),
    ("I've felt flat and teary all week and honestly I don't want to wake up tomorrow", True),
    ("mấy hôm nay mình buồn lắm, chỉ muốn ngủ luôn không dậy nữa", True),
])
def test_low_mood_is_ordinary_until_it_carries_a_wish_not_to_live(config, semantic, text, crisis):
    """Sadness, tears and loneliness get the lesson's warm reply, not a crisis check-in
    (exemplars_*-lowmood.yaml); the same mood with a wish not to wake up is self-harm."""
    labels = {f.label for f in flags(text, config, semantic)}
    assert labels == ({"self_harm"} if crisis else set()), text


@pytest.mark.parametrize("text, crisis", [
    ("My uncle told us about his years in the navy and the storm where he thought the ship would sink", False),
    ("ông bà mình vừa chia đất cho các con, ông bà vẫn khỏe, bảo chia sớm cho khỏi lo", False),
    ("I gave my dog to my neighbour and wrote letters to my family, they won't need to worry about me after tonight",
     True),
    ("mình đã gửi con mèo cho bạn nuôi và viết thư cho bố mẹ rồi, sau tối nay không ai phải lo cho mình nữa", True),
])
def test_life_events_told_with_their_reason_are_ordinary_and_a_final_reason_is_not(config, semantic, text, crisis):
    """A war story, land shared out by healthy grandparents (exemplars_*-lifecontext.yaml)
    are ordinary; pets given away and letters written with no one left to worry "after
    tonight" are a preparation, whose reply comes first."""
    found = flags(text, config, semantic)
    assert {f.label for f in found} == ({"self_harm"} if crisis else set()), text
    if crisis:
        assert [f.severity for f in found] == ["imminent"]


def test_the_modules_own_example_answers_are_ordinary(config, semantic):
    library = load_library()
    answers = [c.example_answer for m in library.modules.values() for t in m.topics for c in t.checks]
    flagged = [a for a in answers if flags(a, config, semantic)]
    assert len(answers) >= 20 and flagged == []


def test_a_crisis_at_the_end_of_a_long_message_is_found_in_its_own_window(config, semantic):
    lesson = "I understood the part about the three levels of anxiety and the breathing exercise. " * 8
    text = lesson + "But honestly I have the pills ready and tonight I'm going to take them all."
    [flag] = [f for f in flags(text, config, semantic) if f.label == "self_harm"]
    start = min(e.start for e in flag.evidence)
    assert start > len(lesson) // 2  # the evidence points at the end, not the lesson talk


@pytest.mark.parametrize("text", UNLISTED_PLANS)
def test_a_plan_inside_a_long_message_of_lesson_talk_is_still_flagged(config, semantic, text):
    # A plan in plain words is flagged wherever it sits among ordinary sentences: a message
    # read in several windows must not ask more of the one that holds it (a threshold raised
    # by ln(windows) missed two of these three; see docs/safety.md, "The second development set").
    before = "Thanks for the lesson on sleep, the part about keeping the same wake-up time made sense to me. " * 3
    after = " Anyway, what was the name of the breathing exercise with the long out-breath? " * 3
    found = flags(before + text + after, config, semantic)
    assert "self_harm" in {f.label for f in found}
    assert any(f.severity == "imminent" for f in found if f.label == "self_harm")


def test_an_authors_broken_exemplar_is_reported_with_file_and_line(tmp_path):
    (tmp_path / "exemplars_en.yaml").write_text(
        "exemplars:\n"
        "  - {text: \"I am fine\", label: none}\n"
        "  - {text: \"I will end it tonight\", label: self_harm}\n"
        "  - {text: \"\", label: none}\n"
        "  - {text: \"x\", label: sadness, severity: serious}\n", encoding="utf-8")
    with pytest.raises(BankError) as raised:
        load_bank(tmp_path, ["self_harm"])
    message = str(raised.value)
    assert "exemplars_en.yaml:3: a crisis exemplar needs `severity`" in message
    assert "exemplars_en.yaml:4: each exemplar needs a non-empty `text`" in message
    assert "exemplars_en.yaml:5: `label` must be none or one of ['self_harm']" in message


def test_the_distress_reader_takes_back_doubtful_flags_of_distress_and_no_crisis(config, semantic):
    """Heavy distress with no wish to die (evals/safety/dev4.yaml's look-alikes: a sacking,
    a breakup, loneliness) is what the semantic layer mistook most; the distress reader
    (tutor.risk.distress) takes back its doubtful flags there, and no crisis message of the
    same set loses its flag."""
    import dataclasses

    from tutor.risk.evaluate import DEV4_SET, load_labelled_set

    assert semantic.distress_reader is not None
    without = dataclasses.replace(semantic, distress_reader=None)
    messages = load_labelled_set(DEV4_SET, set(config.labels))
    distress = [m.text for m in messages if m.kind == "distress"]
    crisis = [m for m in messages if m.labels]
    assert len(distress) >= 20 and len(crisis) >= 50
    flagged_before = [t for t in distress if flags(t, config, without)]
    flagged_now = [t for t in distress if flags(t, config, semantic)]
    assert set(flagged_now) < set(flagged_before)
    assert len(flagged_now) <= len(flagged_before) - 3
    lost = [m.text for m in crisis if {f.label for f in flags(m.text, config, without)} & set(m.labels)
            and not {f.label for f in flags(m.text, config, semantic)} & set(m.labels)]
    assert lost == []


@pytest.mark.parametrize("with_distress", [False, True])
def test_an_authors_bank_gets_a_distress_reader_only_from_distress_exemplars(tmp_path, monkeypatch, with_distress):
    """An author's own bank trains the distress reader when it has exemplars of heavy
    distress (kind distress or low_mood) and screens without one when it has none; either
    way the layer is trained once and loaded from the disk after."""
    from tutor.risk.semantic import load_semantic

    monkeypatch.setenv("TUTOR_CACHE_DIR", str(tmp_path / "cache"))
    lines = ["exemplars:",
             '  - {text: "I have the pills counted out and tonight I take them all", label: self_harm, severity: imminent}',
             '  - {text: "I wish I could fall asleep and never wake up", label: self_harm, severity: serious}',
             '  - {text: "this homework is killing me lol", label: none, kind: idiom}',
             '  - {text: "see you next week, off on holiday", label: none, kind: goodbye}']
    if with_distress:
        lines += ['  - {text: "I lost my job today and I cannot stop shaking", label: none, kind: distress}',
                  '  - {text: "everything feels heavy and grey this month", label: none, kind: low_mood}']
    bank = tmp_path / "bank"
    bank.mkdir()
    (bank / "exemplars_en.yaml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    layer = load_semantic(bank, ["self_harm"])
    assert (layer.distress_reader is not None) == with_distress
    kept = sorted(p.name for p in (tmp_path / "cache" / "models").iterdir())
    assert len(kept) == (2 if with_distress else 1)
    again = load_semantic(bank, ["self_harm"])
    assert sorted(p.name for p in (tmp_path / "cache" / "models").iterdir()) == kept
    assert (again.distress_reader is not None) == with_distress
    text = "I have the pills counted out and tonight I take them all"
    assert layer.read(text, _vectors_of(text)).flags == again.read(text, _vectors_of(text)).flags


def _vectors_of(text):
    from tutor.understand import embedder, windows

    return embedder().embed([text[a:b] for a, b in windows(text)])
