"""Task templates per domain: turn the content tables (`suitegen/content/*.yaml`) into task specs.

Each generator draws from its own seeded `random.Random`, in a fixed order, so the suite is
byte-identical for the same content and code. Difficulty is spread on purpose: `easy` templates use
lenient checks on terms the prompt practically forces, `hard` ones ask for rare terms, lipograms, exact
counts or all-lowercase text, `medium` sit in between.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from suitegen.builders import (
    all_,
    all_of,
    any_,
    any_of,
    audit,
    bullets,
    crit,
    ends,
    lines_exactly,
    not_,
    sc,
    starts,
    task,
    wc,
    word_any,
)
from suitegen.content import Common, InstructionFollowing, Medical, Roleplay, Science, Topic, Writing, load

LEVELS = ("easy", "medium", "hard")


def _common_checks() -> tuple[dict, dict]:
    """(chatty preamble, breaking character): checks several domains' pitfalls share."""
    common = load("common", Common)
    return (any_of(*(starts(o) for o in common.preamble_openers)), any_(*common.ai_break_phrases))


# -- medical ----------------------------------------------------------------------------------------
def gen_medical(rng: random.Random) -> list[dict]:
    med = load("medical", Medical)
    clinician = any_(*med.clinician_terms)
    out = []
    for c in med.conditions:
        name, key, key_d, treat, treat_d = c.name, c.key_terms, c.key_desc, c.treatment_terms, c.treatment_desc
        sym, pit, pit_d, ref, level = c.symptom_terms, c.pitfall_phrases, c.pitfall_desc, c.reference, c.level
        terms = key + treat
        p = f"In two or three sentences, explain what {name} is and how it is usually treated."
        crits = [
            crit("essential", f"Correctly {key_d}.", any_(*key)),
            crit("important", f"Treatment: {treat_d}.", any_(*treat)),
            crit("optional", "Keeps to about two or three sentences.", sc(1, 4)),
            crit("pitfall", f"Gives harmful advice: {pit_d}.", any_(*pit), -5.0),
        ]
        if rng.random() < 0.5:
            crits.append(crit("important", "The explanation is medically accurate and invents no facts."))
        out.append(
            task("medical", "med_explain", level, p, crits, audit(terms, 15, p, f"explains {name}"), ref, topic=name)
        )

        n = rng.choice([40, 50, 60])
        p = f"What is the usual first-line treatment for {name}? Answer in under {n} words."
        crits = [
            crit("essential", f"Treatment: {treat_d}.", any_(*treat)),
            crit("optional", f"Stays under {n} words.", wc(1, n - 1)),
            crit("important", "Suggests involving a doctor, pharmacist or other clinician.", clinician),
            crit("pitfall", f"Gives harmful advice: {pit_d}.", any_(*pit), -5.0),
        ]
        out.append(
            task("medical", "med_treatment", level, p, crits, audit(treat, 8, p, "names a treatment"), ref, topic=name)
        )

        rel = rng.choice(med.relations)
        p = f"My {rel} was just diagnosed with {name}. What are the usual symptoms? Please list them as bullet points."
        hard = level == "hard"
        crits = [
            crit("essential", "Lists at least one typical symptom.", any_(*sym)),
            crit("important", "Uses a bullet list with at least two items.", bullets(2)),
            crit("optional", f"Also {key_d}.", any_(*key)),
            crit(
                "pitfall",
                "Tells the user to ignore the diagnosis or skip medical follow-up.",
                any_("ignore", "no need to see", "don't need a doctor", "do not need a doctor"),
                -3.0,
            ),
        ]
        out.append(
            task(
                "medical",
                "med_symptoms",
                "hard" if hard else "medium",
                p,
                crits,
                audit(sym, 10, p, "names a real symptom"),
                None,
                topic=name,
            )
        )
    for q in med.quick:
        crits = [
            crit("essential", f"Answer: {q.answer_desc}.", any_(*q.answer_terms)),
            crit("optional", "Keeps the answer reasonably short (under 100 words).", wc(1, 99)),
            crit("pitfall", "Gives a wrong answer.", any_(*q.wrong_terms), -3.0),
        ]
        out.append(
            task(
                "medical",
                "med_quick",
                "easy",
                q.question,
                crits,
                audit(q.answer_terms, 6, q.question, q.answer_desc),
                q.reference,
                topic=q.answer_terms[0],
            )
        )
    for d in med.drugs:
        drug, use, pit = d.name, d.use_terms, d.pitfall_phrases
        p = f"What is {drug} used for, and what is one common side effect?"
        crits = [
            crit("essential", f"States what {drug} is used for.", any_(*use)),
            crit("important", "Names a real common side effect.", any_(*d.side_effect_terms)),
            crit("optional", "Answers in under 80 words.", wc(1, 79)),
            crit("pitfall", "Claims it is free of risks or misstates its use.", any_(*pit), -5.0),
        ]
        out.append(
            task(
                "medical",
                "med_drug",
                d.level,
                p,
                crits,
                audit(use, 10, p, f"says what {drug} treats"),
                d.reference,
                topic=drug,
            )
        )
        p = (
            f"Explain how {drug} works in exactly 3 bullet points, use the word 'mechanism', and end with a "
            f"question for the patient."
        )
        crits = [
            crit("essential", "Uses exactly three bullet points.", bullets(3, 3)),
            crit("essential", "Uses the word 'mechanism'.", any_("mechanism")),
            crit("important", "Ends with a question to the patient.", ends("?", min_words=10)),
            crit("optional", f"States what {drug} is used for.", any_(*use)),
            crit("pitfall", "Claims it is free of risks or misstates its use.", any_(*pit), -3.0),
        ]
        # No reference: a correct answer is mostly format here, and the drug reference lacks the asked-for word.
        out.append(
            task(
                "medical",
                "med_drug_format",
                "hard",
                p,
                crits,
                audit(use, 12, p, f"says what {drug} treats"),
                None,
                topic=drug,
            )
        )
    return out


# -- science ----------------------------------------------------------------------------------------
def gen_science(rng: random.Random) -> list[dict]:
    sci = load("science", Science)
    out = []
    for ph in sci.phenomena:
        topic, key, key_d, sec, sec_d = ph.topic, ph.key_terms, ph.key_desc, ph.second_terms, ph.second_desc
        mis, mis_d, rare, ref, level = (
            ph.misconception_phrases,
            ph.misconception_desc,
            ph.rare_term,
            ph.reference,
            ph.level,
        )
        n = rng.choice([40, 50, 60])
        p = f"Explain {topic} in under {n} words."
        crits = [
            crit("essential", f"Correctly {key_d}.", any_(*key)),
            crit("important", f"Also {sec_d}.", any_(*sec)),
            crit("optional", f"Stays under {n} words.", wc(1, n - 1)),
            crit("pitfall", f"States a misconception: {mis_d}.", any_(*mis), -3.0),
        ]
        if rng.random() < 0.5:
            crits.append(crit("important", "The explanation is scientifically accurate and clear."))
        out.append(
            task(
                "science",
                "sci_explain",
                level,
                p,
                crits,
                audit(key + sec, 10, p, f"explains {topic}"),
                ref,
                topic=topic,
            )
        )

        p = f"Explain {topic} to a ten-year-old in two or three short sentences."
        crits = [
            crit("essential", f"Correctly {key_d}.", any_(*key)),
            crit("important", "Uses two or three sentences.", sc(2, 3)),
            crit("optional", "Keeps it short enough for a child (under 70 words).", wc(1, 69)),
            crit("pitfall", f"States a misconception: {mis_d}.", any_(*mis), -3.0),
        ]
        out.append(
            task("science", "sci_eli5", level, p, crits, audit(key + sec, 12, p, f"explains {topic}"), ref, topic=topic)
        )

        if rng.random() < 0.5:
            p = f"Describe {topic} in exactly 3 bullet points. Use the term '{rare}'."
            crits = [
                crit("essential", f"Uses the term '{rare}'.", any_(rare)),
                crit("important", "Uses exactly three bullet points.", bullets(3, 3)),
                crit("optional", f"Correctly {key_d}.", any_(*key)),
                crit("pitfall", f"States a misconception: {mis_d}.", any_(*mis), -3.0),
            ]
            tmpl = "sci_bullets_term"
        else:
            # Hidden rubric item: the rare term is not asked for in the prompt (the chess/zugzwang pattern).
            p = f"Tell me about {topic}, and end your answer with a question."
            # No easy partial-credit item here, so the base policy gets genuine all-0 groups (collapse_low).
            crits = [
                crit("essential", f"Mentions the key term '{rare}'.", any_(rare)),
                crit("important", "Ends with a genuine question.", ends("?", min_words=10)),
                crit("pitfall", f"States a misconception: {mis_d}.", any_(*mis), -3.0),
            ]
            tmpl = "sci_hidden_term"
        # No reference: the topic's reference sentence does not use the rare term this variant requires.
        out.append(
            task(
                "science",
                tmpl,
                "hard",
                p,
                crits,
                audit(key + sec, 12, p, f"explains {topic}"),
                None,
                topic=topic,
                extra_meta={"rare_term": rare},
            )
        )
    for q in sci.quick:
        crits = [
            crit("essential", f"Answer: {q.answer_desc}.", any_(*q.answer_terms)),
            crit("optional", "Keeps the answer under 100 words.", wc(1, 99)),
            crit("pitfall", "Gives a wrong answer.", any_(*q.wrong_terms), -3.0),
        ]
        out.append(
            task(
                "science",
                "sci_quick",
                "easy",
                q.question,
                crits,
                audit(q.answer_terms, 6, q.question, q.answer_desc),
                q.reference,
                topic=q.answer_terms[0],
            )
        )
    return out


# -- writing ----------------------------------------------------------------------------------------
def _writing_hard(rng: random.Random, wri: Writing, t: Topic, preamble: dict) -> dict:
    """One of the all-fail devices for the topic: an all-lowercase poem, a lipogram or an acrostic."""
    topic, terms, tdesc = t.topic, t.terms, f"is clearly about {t.topic}"
    hard = rng.choice(["lower", "lipogram", "acrostic"])
    if hard == "lower":
        p = f"Write a short poem about {topic} using only lowercase letters, with no capital letters at all."
        crits = [
            crit("essential", "Uses only lowercase letters.", {"type": "char_class", "mode": "all_lowercase"}),
            crit("important", f"The poem {tdesc}.", any_(*terms)),
            crit("optional", "Is a short poem (10 to 60 words).", wc(10, 60)),
        ]
    elif hard == "lipogram":
        letters = wri.lipogram_letters
        letter = rng.choice(letters)
        if all(letter in w for w in terms):  # keep it possible: some topic word must avoid the letter
            letter = next(ch for ch in letters if any(ch not in w for w in terms))
        p = f"Write two sentences about {topic} without using the letter '{letter}' anywhere."
        # One combined criterion (like the spike's sun lipogram): no partial credit, an all-fail task.
        crits = [
            crit(
                "essential",
                f"Writes at least 8 words about {topic} without ever using the letter '{letter}'.",
                all_of({"type": "forbid_chars", "chars": letter, "min_words": 8}, any_(*terms)),
            ),
            crit("pitfall", "Opens with chatty preamble instead of the text.", preamble, -1.0),
        ]
    else:
        word = rng.choice(wri.acrostic_words)
        p = (
            f"Write an acrostic poem about {topic} for the word {word}: the first letters of the "
            f"{len(word)} lines must spell {word}."
        )
        pattern = r"^\s*" + r"\n\s*".join(f"{ch}[^\\n]*" for ch in word)
        crits = [
            crit(
                "essential",
                f"The first letters of the lines spell {word}.",
                {"type": "regex", "pattern": pattern, "case_sensitive": False},
            ),
            crit("important", f"The poem {tdesc}.", any_(*terms)),
            crit("pitfall", "Opens with chatty preamble instead of the poem.", preamble),
        ]
    return task("writing", f"wri_{hard}", "hard", p, crits, audit(terms, 8, p, f"is about {topic}"), topic=topic)


def gen_writing(rng: random.Random) -> list[dict]:
    wri = load("writing", Writing)
    preamble, _ = _common_checks()
    out = []
    for t in wri.topics:
        topic, terms = t.topic, t.terms
        tdesc = f"is clearly about {topic}"
        p = f"Write a short poem about {topic} in exactly four lines."
        crits = [
            crit("essential", f"The poem {tdesc}.", any_(*terms)),
            crit("important", "Has exactly four lines.", lines_exactly(4)),
            crit("optional", "Stays short (under 60 words).", wc(4, 59)),
            crit("pitfall", "Opens with chatty preamble ('Sure', 'Here is ...') instead of the poem.", preamble),
        ]
        if rng.random() < 0.4:
            crits.append(crit("optional", "Uses vivid, concrete imagery."))
        out.append(
            task(
                "writing", "wri_poem_4lines", "medium", p, crits, audit(terms, 10, p, f"is about {topic}"), topic=topic
            )
        )

        p = f"Write a haiku about {topic}."
        crits = [
            crit("essential", f"The haiku {tdesc}.", any_(*terms)),
            crit("important", "Has exactly three lines.", lines_exactly(3)),
            crit("optional", "Is haiku-length (5 to 20 words).", wc(5, 20)),
            crit("pitfall", "Opens with chatty preamble ('Sure', 'Here is ...') instead of the poem.", preamble),
        ]
        out.append(
            task("writing", "wri_haiku", "medium", p, crits, audit(terms, 5, p, f"is about {topic}"), topic=topic)
        )

        p = f"Write a two-sentence story about {topic} that ends with an exclamation mark."
        crits = [
            crit("essential", f"The story {tdesc}.", any_(*terms)),
            crit("important", "Ends with an exclamation mark after real content.", ends("!", min_words=10)),
            crit("optional", "Uses two sentences.", sc(2, 2)),
            crit("pitfall", "Opens with chatty preamble ('Sure', 'Here is ...') instead of the story.", preamble),
        ]
        out.append(
            task("writing", "wri_story", "medium", p, crits, audit(terms, 12, p, f"is about {topic}"), topic=topic)
        )

        p = f"Write one sentence about {topic}."
        crits = [
            crit("essential", f"The sentence {tdesc}.", any_(*terms)),
            crit("optional", "Has some content and is not a long essay (3 to 100 words).", wc(3, 100)),
        ]
        out.append(
            task("writing", "wri_one_sentence", "easy", p, crits, audit(terms, 5, p, f"is about {topic}"), topic=topic)
        )
        out.append(_writing_hard(rng, wri, t, preamble))
    for e in wri.emails:
        name, purpose, terms = e.name, e.purpose, e.terms
        p = (
            f"Write a short email to {e.recipient} to {purpose}. Begin with 'Dear {name},' and sign off with "
            f"'Best regards'."
        )
        crits = [
            crit("essential", f"Begins with 'Dear {name},'.", starts(f"Dear {name}")),
            crit("important", "Signs off with 'Best regards'.", any_("best regards")),
            crit("important", f"Actually asks to {purpose}.", any_(*terms)),
            crit("optional", "Stays short (under 120 words).", wc(10, 119)),
            crit(
                "pitfall",
                "Leaves a template placeholder such as [Your Name].",
                any_("[your name]", "[name]", "[recipient", "[insert", "[date]"),
                -3.0,
            ),
        ]
        out.append(
            task("writing", "wri_email", "medium", p, crits, audit(terms, 20, p, f"asks to {purpose}"), topic=purpose)
        )
    for pr in wri.products:
        product, terms = pr.product, pr.terms
        p = f"Write a catchy slogan for {product}. Keep it under 12 words."
        crits = [
            crit("essential", "Is a slogan of 2 to 11 words.", wc(2, 11)),
            crit("important", f"Refers to {product}.", any_(*terms)),
            crit("pitfall", "Opens with chatty preamble instead of the slogan.", preamble),
        ]
        out.append(
            task("writing", "wri_slogan", "medium", p, crits, audit(terms, 2, p, f"refers to {product}"), topic=product)
        )
    return out


# -- roleplay ---------------------------------------------------------------------------------------
def gen_roleplay(rng: random.Random) -> list[dict]:
    rp = load("roleplay", Roleplay)
    _, ai_break = _common_checks()
    out = []
    for pe in rp.personas:
        voice = (
            any_of(any_(*pe.voice_phrases), word_any(*pe.voice_words)) if pe.voice_words else any_(*pe.voice_phrases)
        )
        rare, opener = pe.rare_word, pe.opener
        scen = list(rp.scenarios)
        rng.shuffle(scen)
        for k, sc_ in enumerate(scen):
            msg, terms_d = sc_.message, sc_.desc
            topic_terms = sc_.terms if sc_.terms is not None else [pe.name.split("-")[0]]
            crits = [
                crit("essential", f"Stays in character: {pe.voice_desc}.", voice),
                crit("important", f"Answers the user: {terms_d}.", any_(*topic_terms)),
                crit("pitfall", "Breaks character by calling itself an AI or a language model.", ai_break, -5.0),
            ]
            if k == 0:  # easy: the lenient version of the task
                crits.append(crit("optional", "Keeps the reply under 100 words.", wc(1, 99)))
                difficulty, tmpl, p = "easy", "rp_lenient", msg
            elif k in (1, 2, 6):
                crits.append(crit("optional", "Keeps the reply under 60 words.", wc(1, 59)))
                if rng.random() < 0.5:
                    crits.append(crit("important", "Sounds natural and engaging, like a real conversation."))
                difficulty, tmpl, p = "medium", "rp_scene", msg + " Keep it under 60 words."
            elif k == 3:
                p = f"{msg} Start your reply with '{opener}' and end it with an exclamation mark."
                crits += [
                    crit("important", f"Starts with '{opener}'.", starts(opener)),
                    crit("optional", "Ends with an exclamation mark after real content.", ends("!", min_words=8)),
                ]
                difficulty, tmpl = "medium", "rp_open_close"
            elif k == 4:
                p = msg  # hidden in-character word, not asked for in the prompt
                crits.append(crit("important", f"Uses the in-character word '{rare}'.", any_(rare)))
                difficulty, tmpl = "hard", "rp_hidden_word"
            else:
                p = f"{msg} Answer in exactly 3 bullet points and use the word '{rare}'."
                crits += [
                    crit("important", "Uses exactly three bullet points.", bullets(3, 3)),
                    crit("important", f"Uses the word '{rare}'.", any_(rare)),
                ]
                difficulty, tmpl = "hard", "rp_bullets_word"
            aud = audit(topic_terms, 12, p, f"stays on the request ({terms_d})")
            aud.append(
                crit(
                    "important",
                    "Stays in character throughout and never mentions being an AI.",
                    all_of(voice, not_(ai_break)),
                )
            )
            out.append(
                task("roleplay", tmpl, difficulty, p, crits, aud, system=pe.system, topic=f"{pe.persona}: {msg}")
            )
    return out


# -- instruction following --------------------------------------------------------------------------
def _if_task(
    rng: random.Random, spec: InstructionFollowing, t: Topic, names: list[str], forbid_word: bool, preamble: dict
) -> dict:
    topic, terms = t.topic, t.terms
    lead = rng.choice(spec.leads).format(t=topic)
    k1, k2 = terms[0], terms[1]
    parts, crits, rank = [lead], [], 0
    for i, name in enumerate(names):
        c = spec.constraints[name]
        check = all_(k1, k2) if name == "keywords" else c.check
        parts.append(c.prompt.format(k1=k1, k2=k2))
        crits.append(crit("essential" if i == 0 else "important", c.criterion.format(k1=k1, k2=k2), check))
        rank = max(rank, c.rank)
    if forbid_word:
        # Negative instruction as a pitfall: saying the topic's own main word is the failure.
        word = terms[0]
        parts.append(f"Do not use the word '{word}'.")
        crits.append(crit("pitfall", f"Uses the forbidden word '{word}'.", word_any(word, word + "s"), -5.0))
        rank = 2
    crits.append(crit("important" if rank else "essential", f"Stays on topic ({topic}).", any_(*terms)))
    if rank >= 1:
        crits.append(crit("pitfall", "Opens with chatty preamble ('Sure', 'Here is ...').", preamble, -1.0))
    if rng.random() < 0.25:
        crits.append(crit("optional", "The content is helpful and accurate."))
    p = " ".join(parts)
    return task(
        "instruction_following",
        "if_" + "+".join(names) + ("+forbid_word" if forbid_word else ""),
        LEVELS[rank],
        p,
        crits,
        audit(terms, 6, p, f"is about {topic}"),
        topic=topic,
    )


def gen_instruction_following(rng: random.Random) -> list[dict]:
    spec = load("instruction_following", InstructionFollowing)
    preamble, _ = _common_checks()
    clash = [set(pair) for pair in spec.clashes]
    out = []
    by_rank: dict[int, list[str]] = {0: [], 1: [], 2: []}
    for name, c in spec.constraints.items():
        by_rank[c.rank].append(name)
    for t in spec.topics:
        # Per topic: one easy, two medium, two hard (one of them with a second constraint), one forbid-word.
        out.append(_if_task(rng, spec, t, [rng.choice(by_rank[0])], False, preamble))
        for _ in range(2):
            first = rng.choice(by_rank[1])
            names = [first]
            if rng.random() < 0.5:
                second = rng.choice([n for n in by_rank[0] + by_rank[1] if n != first and {first, n} not in clash])
                names.append(second)
            out.append(_if_task(rng, spec, t, names, False, preamble))
        for j in range(2):
            first = rng.choice(by_rank[2])
            names = [first]
            if j == 1:
                second = rng.choice([n for n in by_rank[1] if {first, n} not in clash])
                names.append(second)
            out.append(_if_task(rng, spec, t, names, False, preamble))
        out.append(_if_task(rng, spec, t, [rng.choice(by_rank[0] + by_rank[1])], True, preamble))
    return out


GENERATORS: dict[str, Callable[[random.Random], list[dict]]] = {
    "medical": gen_medical,
    "science": gen_science,
    "writing": gen_writing,
    "roleplay": gen_roleplay,
    "instruction_following": gen_instruction_following,
}
