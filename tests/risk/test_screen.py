"""The offline screen as a learner meets it: crises flagged with evidence on the words that
signal them, everyday idioms and negations left alone, in English and Vietnamese."""

from __future__ import annotations

import hashlib
import unicodedata

import pytest

from tutor.risk import Evidence, RiskFlag, screen
from tutor.risk.screen import span_hash


def labels(text, config):
    return [f.label for f in screen(text, config)]


def only_flag(text, config, label):
    flags = screen(text, config)
    assert [f.label for f in flags] == [label], (text, flags)
    return flags[0]


@pytest.mark.parametrize("text, label, evidence", [
    ("Honestly, I want to kill myself today.", "self_harm", "kill myself"),
    ("I don't want to be alive anymore", "self_harm", "don't want to be alive"),
    ("Everyone would be better off without me.", "self_harm", "better off without me"),
    ("there's no reason to go on", "self_harm", "no reason to go on"),
    ("I've been cutting myself again", "self_harm", "cutting myself"),
    ("I have pills saved up", "self_harm", "pills saved up"),
    ("I can't stop thinking about killing myself", "self_harm", "killing myself"),
    ("I'm not sure I want to live anymore", "self_harm", "not sure I want to live"),
    ("I want to just end it all", "self_harm", "want to just end it all"),
    ("I'm going to hurt someone if this doesn't stop", "harm_to_others", "going to hurt someone"),
    ("My dad beats me and I'm scared to go home", "abuse", "My dad beats me"),
    ("I'm being sexually abused by my uncle", "abuse", "being sexually abused"),
    ("I have chest pain and I can't breathe", "medical_emergency", "chest pain and I can't breathe"),
    ("I fainted and hit my head", "medical_emergency", "fainted and"),
    ("My best friend says he wants to kill himself", "concern_for_other", "kill himself"),
    ("Tôi muốn chết.", "self_harm", "muốn chết"),
    ("Tôi không muốn sống nữa", "self_harm", "không muốn sống nữa"),
    ("tôi muốn tự tử", "self_harm", "muốn tự tử"),
    ("Mình hay tự làm đau bản thân", "self_harm", "tự làm đau bản thân"),
    ("Tôi muốn kết thúc cuộc đời mình", "self_harm", "kết thúc cuộc đời"),
    ("Chồng tôi đánh tôi", "abuse", "Chồng tôi đánh tôi"),
    ("Tôi bị đau ngực và khó thở", "medical_emergency", "đau ngực và khó thở"),
])
def test_each_kind_of_crisis_is_flagged_with_evidence_on_the_phrase(config, text, label, evidence):
    flag = screen(text, config)[0]
    assert flag.label == label and flag.source == "offline"
    snippets = [e.snippet(text) for e in flag.evidence]
    assert any(evidence in s for s in snippets), snippets
    for e in flag.evidence:
        assert e.sha256 == hashlib.sha256(text[e.start:e.end].encode()).hexdigest()


@pytest.mark.parametrize("text, evidence", [
    ("im comitting suicide tonight", "comitting suicide"),
    ("I am committing suicide", "committing suicide"),
    ("sometimes i feel like committing suicide", "feel like committing suicide"),
    ("can somebody please just kill me", "somebody please just kill me"),
    ("anyone kill me pls", "anyone kill me"),
    ("what is the quickest way to kill urself", "quickest way to kill urself"),
    ("I keep googling how to kill myself", "googling how to kill myself"),
    ("I'm going to gas myself in the car", "gas myself"),
    ("i feel so low and i feel like i could commit suicide", "feel like i could commit suicide"),
    ("honestly i rather die than keep living like this", "i rather die"),
    ("I keep thinking about jumping off the bridge on my way home", "jumping off the bridge"),
    ("why finish the course when i dont plan on being around much longer", "dont plan on being around much longer"),
])
def test_first_person_suicide_requests_to_be_killed_and_method_questions_are_flagged(config, text, evidence):
    """Short, plain statements the semantic layer may not read (under four words) or may
    read weakly: the phrase layer names them, with typos folded ("comitting", "urself")."""
    flag = only_flag(text, config, "self_harm")
    assert any(evidence.lower() in e.snippet(text).lower() for e in flag.evidence), flag.evidence


@pytest.mark.parametrize("text", [
    "he committed suicide in the last act of the play",
    "kill me now, this homework is endless",
    "my mum will kill me if I miss the bus",
    "is it true that gas stoves are bad for asthma?",
    "we were thinking about jumping off the pier into the sea this summer",
    "I don't plan on staying around the office much longer, I'm changing jobs",
])
def test_the_new_first_person_phrases_leave_third_person_and_idioms_alone(config, text):
    assert screen(text, config) == []


def test_an_overdose_is_both_a_medical_emergency_and_self_harm(config):
    assert set(labels("I took an overdose", config)) == {"medical_emergency", "self_harm"}
    assert set(labels("Tôi vừa uống quá liều thuốc", config)) == {"medical_emergency", "self_harm"}


@pytest.mark.parametrize("text", [
    "took my sleeping pills with half a bottle of vodka and now I feel heavy",
    "máu chảy mãi không cầm, em phải làm sao",
    "mau tham het 2 cai khan ma van chua dung",
    "em vừa đứt tay, máu chảy nhiều quá không cầm được",
])
def test_pills_with_drink_and_bleeding_that_goes_on_are_medical_emergencies(config, text):
    assert "medical_emergency" in labels(text, config)


@pytest.mark.parametrize("text", [
    "this lesson is killing me",
    "I could kill for a coffee",
    "I'm dying to know",
    "dead tired today",
    "I nearly died of embarrassment",
    "that's a killer app",
    "I would never hurt myself",
    "I'm not suicidal, just nervous",
    "my character kills himself in the novel",
    "why do panic attacks feel like dying?",
    "I cut myself a slice of cake",
    "My boss will kill me if I'm late",
    "my little sister absolutely thrashed me at monopoly on sunday",
    "I walked 3 kms today",
    "Why do I feel like I can't breathe when I get anxious?",
    "Mệt chết đi được!",
    "Chết thật, tôi quên làm bài tập rồi!",
    "Tôi muốn giết thời gian trước buổi hẹn.",
    "Bố tôi đánh cầu lông rất giỏi.",
    "Tôi không bao giờ làm hại bản thân.",
    "when i said i wanted to die earlier i meant of embarrassment, i fell over in assembly",
    "I had suicidal thoughts at school but I'm fine now, is the breathing topic next?",
    "Không phải muốn tự tử gì đâu, chỉ là mệt vì trường lớp quá.",
    "ko phai muon chet dau, chi met thoi",
    "lúc nãy mình nói muốn chết là vì quê quá thôi",
    "hồi cấp hai mình từng nghĩ tới chuyện tự tử nhưng giờ ổn rồi, hỏi bài thôi",
    "tại sao có người lại tự làm hại bản thân vậy, lớp em đang học",
])
def test_idioms_negations_and_topic_questions_are_not_crises(config, text):
    assert screen(text, config) == []


def test_a_game_lost_is_an_idiom_but_a_beating_at_home_is_not(config):
    assert screen("my brother beat me really badly at chess yesterday", config) == []
    assert labels("my brother beat me really badly at home yesterday", config) == ["abuse"]


# Read as the lesson's, not a crisis, unless the reading of a crisis is there too: "mình"
# is "me" and "oneself" ("nhốt mình trong phòng" is withdrawing, unless someone does it to
# the learner); breathlessness told as how panic feels is the anxiety course's own subject,
# while breathlessness happening now stays an emergency.
@pytest.mark.parametrize("text, expected", [
    ("dạo này đi học về là em nhốt mình trong phòng, không muốn nói chuyện với ai", []),
    ("di hoc ve la nhot minh trong phong ca ngay", []),
    ("bố nhốt mình trong phòng cả ngày không cho ăn", ["abuse"]),
    ("bo nhot minh trong phong ca ngay khong cho an", ["abuse"]),
    ("chồng nhốt tôi trong nhà, không cho ra ngoài", ["abuse"]),
    ("when i panic i feel like i can't breathe, but then it goes away", []),
    ("every time I have a panic attack it feels like I can't breathe", []),
    ("mỗi lần hoảng loạn mình cảm thấy như không thở được", []),
    ("moi lan hoang loan minh cam thay nhu khong tho duoc", []),
    ("I can't breathe and my chest hurts", ["medical_emergency"]),
    ("i'm having a panic attack and i can't breathe", ["medical_emergency"]),
    ("khó thở, đau ngực, không thở được", ["medical_emergency"]),
])
def test_the_lessons_own_readings_and_the_crisis_beside_them(config, text, expected):
    assert labels(text, config) == expected


def test_the_longer_reading_wins_over_a_negation_inside_it(config):
    # "not suicidal" is a negation; the second clause is a crisis all the same
    flag = only_flag("I'm not suicidal, but lately I wish I were dead.", config, "self_harm")
    assert [e.snippet("I'm not suicidal, but lately I wish I were dead.") for e in flag.evidence] == ["wish I were dead"]


@pytest.mark.parametrize("text", [
    "I don't want to live", "I dont want to live", "I don’t want to live", "I do not want to live",
    "I DON´T WANT TO LIVE", "i don`t want to live",
])
def test_apostrophe_variants_and_spelled_out_negation_match_the_same_phrase(config, text):
    assert labels(text, config) == ["self_harm"]


@pytest.mark.parametrize("text", [
    "tôi muốn chết", "toi muon chet", "TÔI MUỐN CHẾT", "khong muon song nua",
    unicodedata.normalize("NFD", "Tôi không muốn sống nữa"), "toi ko muon song nua",
])
def test_vietnamese_matches_with_without_and_decomposed_diacritics(config, text):
    assert labels(text, config) == ["self_harm"]


@pytest.mark.parametrize("text", [
    "không phải mình không muốn học, mình muốn chết",
    "từng nghĩ tới chuyện tự tử, giờ lại nghĩ tiếp",
    "mình nói muốn chết là vì thật sự muốn chết",
    "when i said i wanted to die i meant it, it was not embarrassment",
    "I had suicidal thoughts as a teen and they are back, I'm not fine",
])
def test_negations_cover_only_what_they_say(config, text):
    assert labels(text, config) == ["self_harm"]


@pytest.mark.parametrize("text", [
    "I don't really want to die, I just want this week of deadlines to be over",
    "no, I've never self-harmed, I asked because of my cousin's essay",
    "I have no suicidal thoughts at all, only a racing heart before exams",
    "I no longer want to die; the counselling helped",
    "mình không hề muốn chết, chỉ mệt vì thi cử thôi",
    "minh khong muon chet dau, chi met thoi",
    "em chưa bao giờ tự tử, chỉ hỏi cho bài tập",
    "to be honest I'm not thinking about hurting myself, I'm just tired of this job",
    "I'm not planning to kill myself, I only meant the exam week is brutal",
])
def test_a_phrase_the_learner_denies_with_a_negator_is_not_a_crisis(config, text):
    assert screen(text, config) == []


@pytest.mark.parametrize("text", [
    "I don't want to live anymore",  # the denial is the phrase's own
    "No. I want to die",  # a sentence break between the "no" and the phrase
    "why not just kill myself",  # a bare "not" denies nothing here
    "I can't stop cutting myself",
    "i dont want to wake up. i want to die",
    "mình không muốn sống nữa",
    "không. mình muốn chết",
    "I'm thinking about hurting myself",  # the thinking is not denied
    "I'm not thinking about anything but killing myself",  # words between: the phrase is not denied
])
def test_a_negator_denies_only_the_phrase_right_after_it(config, text):
    assert labels(text, config) == ["self_harm"]


def test_a_module_may_add_negators_and_a_bad_one_names_its_line():
    from tutor.risk import check_safety_text
    text = """\
languages: [en]
vocabulary:
  en:
    negators: ["(hardly|scarcely) (ever|)"]
labels:
  self_harm:
    title: Suicide or self-harm
    signals: {en: {phrases: [think* about suicide]}}
    reply: [{type: paragraph, content: Please call your local emergency number.}]
check_in: [{type: paragraph, content: "How are you feeling?"}]
"""
    mine, problems = check_safety_text(text, "mine.yaml")
    assert problems == [] and mine is not None
    assert screen("I hardly ever think about suicide", mine) == []
    assert [f.label for f in screen("I think about suicide", mine)] == ["self_harm"]
    _, problems = check_safety_text(text.replace('"(hardly|scarcely) (ever|)"', '"(hardly"'), "bad.yaml")
    assert len(problems) == 1 and problems[0].startswith("bad.yaml:4: ") and "negators" in problems[0], problems


def test_stripping_diacritics_does_not_turn_slowly_into_suicide(config):
    assert screen("Tôi muốn từ từ học bài này.", config) == []  # từ từ = slowly
    assert screen("toi muon tu tu hoc bai nay", config) == []  # the next word says so
    assert screen("tu tu thoi, khong can voi", config) == []
    marked = only_flag("Tôi muốn tự tử", config, "self_harm")
    unmarked = only_flag("toi muon tu tu", config, "self_harm")  # nothing else to go on: flag
    assert unmarked.confidence < marked.confidence == 0.9


def test_confidence_is_deterministic_by_kind_of_signal(config):
    assert only_flag("I want to kill myself", config, "self_harm").confidence == 0.9  # phrase
    assert only_flag("everyone would be better off without me", config, "self_harm").confidence == 0.7  # indirect
    overdose = {f.label: f.confidence for f in screen("I just took 30 paracetamol", config)}
    assert overdose == {"medical_emergency": 0.8, "self_harm": 0.8}  # a pattern
    assert screen("I want to kill myself", config) == screen("I want to kill myself", config)


def test_someone_else_at_risk_gets_its_own_label_not_self_harm(config):
    text = "What should I do if a friend says they want to die?"
    flag = only_flag(text, config, "concern_for_other")
    assert "friend says they want to die" in flag.evidence[0].snippet(text)
    assert labels("Bạn tôi nói muốn tự tử, tôi phải làm gì?", config) == ["concern_for_other"]


def test_a_crisis_buried_in_a_long_message_is_found_where_it_is(config):
    filler = "Breathing exercises help me when my chest feels tight. " * 60
    text = filler + "Honestly I want to die.\r\n" + filler
    flag = only_flag(text, config, "self_harm")
    assert [e.snippet(text) for e in flag.evidence] == ["want to die"]
    assert flag.evidence[0].start == len(filler) + len("Honestly I ")


def test_phrases_do_not_match_across_sentences(config):
    assert screen("I want to. Die Hard is my favourite film.", config) == []
    assert labels("I just want to... die", config) == ["self_harm"]  # a pause is not a sentence end


def test_invisible_and_lookalike_characters_do_not_hide_a_phrase(config):
    for text in ["I want to k\u200bill my\u00adself", "I want to ｋｉｌｌ ｍｙｓｅｌｆ", "I want to k̸i̸l̸l̸ myself"]:
        flag = only_flag(text, config, "self_harm")
        assert all(e.matches(text) for e in flag.evidence)


def test_empty_and_blank_text_have_no_flags(config):
    assert screen("", config) == [] and screen("  \n ", config) == []


def test_evidence_and_flags_round_trip_through_json(config):
    text = "I want to kill myself"
    flag = screen(text, config)[0]
    again = RiskFlag.from_dict(flag.to_dict())
    assert again == flag
    assert flag.to_dict()["evidence"] == [{"start": 10, "end": 21, "sha256": span_hash("kill myself")}]
    assert Evidence.from_dict(flag.evidence[0].to_dict()).matches(text)
    assert not flag.evidence[0].matches("I want to kiss myself")  # the stored text changed
    for bad in [{"start": 3, "end": 3, "sha256": "0" * 64}, {"start": 0, "end": 2, "sha256": "xyz"}, {}]:
        with pytest.raises(ValueError):
            Evidence.from_dict(bad)
    with pytest.raises(ValueError):
        RiskFlag.from_dict({"label": "self_harm", "confidence": 2, "evidence": []})


def test_replies_come_in_the_language_asked_for(config):
    english = config.reply_for("self_harm", "en")
    vietnamese = config.reply_for("self_harm", "vi-VN")
    assert english and vietnamese and english != vietnamese
    assert "115" in " ".join(b.content for b in vietnamese)
    assert "local emergency number" in " ".join(b.content for b in english)
    assert config.reply_for("abuse", "fr") == config.reply_for("abuse", "en")  # the first language
    assert config.reply_for("abuse") == config.reply_for("abuse", "en")
    assert config.check_in_for("vi") != config.check_in_for("en")
    for label in config.labels:
        for language in config.languages:
            blocks = config.reply_for(label, language)
            assert blocks and all(b.type in {"paragraph", "warning", "list", "info"} for b in blocks)


@pytest.mark.parametrize("text, evidence", [
    ("Please look after my two rabbits once I'm dead, ok? Sorry.", None),
    ("Take care of my little brother for me if anything happens to me",
     "Take care of my little brother for me if anything happens to me"),
    ("This is my final message to anyone. Please don't come looking for me.", "This is my final message to anyone"),
    ("I'm in my car, the engine is running and the garage door is shut", "engine is running and the garage door is shut"),
    ("I'm standing on the wrong side of the railing on the bridge", None),
    ("I already took all the tablets I had, I feel dizzy", "already took all the tablets"),
    ("Hẹn gặp lại mọi người ở kiếp sau", "gặp lại mọi người ở kiếp sau"),
    ("dung tim e nha, kiep sau gap lai", "kiep sau gap lai"),
    ("day la tin nhan cuoi cung cua minh truoc khi ra di", "tin nhan cuoi cung cua minh truoc khi ra di"),
    ("Mình vừa trèo qua lan can cầu rồi", "vừa trèo qua lan can cầu"),
    ("hôm thứ 7 mình thử treo cổ rồi mà dây đứt", "thử treo cổ"),
    ("ngu 1 giac ko day luon chac suong", "ngu 1 giac ko day luon"),
    ("ok. this is the last time anyone will hear from me", "the last time anyone will hear from me"),
    ("You'll never hear from me again. Thanks for everything", "never hear from me again"),
])
def test_farewells_arrangements_and_acts_under_way_are_self_harm(config, text, evidence):
    flags = screen(text, config)
    assert "self_harm" in [f.label for f in flags], (text, flags)
    if evidence:
        flag = next(f for f in flags if f.label == "self_harm")
        assert evidence.lower() in text[flag.evidence[0].start:flag.evidence[0].end].lower() or \
            text[flag.evidence[0].start:flag.evidence[0].end].lower() in evidence.lower(), flag


@pytest.mark.parametrize("text", [
    "That's my last message for today, see you tomorrow!",
    "ok this is my last message before I log off, thanks!",
    "Take care of my plants when I'm gone, I'll be back Sunday",
    "Đây là tin nhắn cuối cùng của mình, mai mình đi học sớm",
    "when I'm not here anymore after graduation, who runs the club?",
    "khỏi tìm mình, mình tự về được",
    "I'm sat in the car with the engine running, waiting for my mum outside school",
    "mình đang đứng ở lan can cầu chụp ảnh",
    "khi tôi không còn ở đây nữa thì ai trực ca đêm",
    "I'll do the breathing exercise tomorrow morning",
    "my manager decided who will take my shift tomorrow",
    "my siblings and I sorted out who gets my old toys for their kids",
    "I won't need my books after this term",
    "my last day ever at this school, so sad to leave",
    "this is the last time you'll hear from me about the printer, promise",
    "you won't hear from me again until Monday, I'm off hiking",
    "I just had the whole box of chocolates, oops",
    "going into the sea now, the water is so warm",
    "the pipe on the exhaust is rusty, need a mechanic",
    "chăm con mèo giúp mình khi mình không còn ở nhà nhé",
    "ngày cuối cùng của cuộc đời sinh viên rồi",
    "Đây là tin nhắn cuối cùng của mình hôm nay nhé, mai học tiếp",
    "I'm doing it tonight with my study group",
    "tối qua mình đã uống thuốc ngủ bác sĩ kê nên ngủ ngon hơn",
    "cuối tuần ngủ một giấc tới trưa mới dậy",
])
def test_an_everyday_last_message_or_plan_is_not_a_farewell(config, text):
    assert "self_harm" not in labels(text, config), text
