"""The built-in content probes draw from: plain words, paraphrase pairs, questions.

Each paraphrase pair says one thing twice, and no two pairs share a subject, so a statement
is related to its own paraphrase only; each question is answered by its own passage only.
"""

from __future__ import annotations

from attrs import frozen

# Common concrete nouns; a small model repeats each of these when asked (see docs/probes.md).
WORDS: tuple[str, ...] = (
    "apple", "river", "candle", "tiger", "violin", "planet", "marble", "garden", "falcon",
    "copper", "lemon", "orange", "window", "pencil", "rocket", "banana", "castle", "dragon",
    "forest", "silver", "cactus", "harbor", "meadow", "pepper", "zebra", "anchor",
    "basket", "cotton", "desert", "bridge", "camera", "dolphin", "feather", "glacier",
    "hammer", "island", "jacket", "kettle", "ladder", "magnet", "needle", "oyster", "parrot",
    "quartz", "rabbit", "saddle", "tomato", "umbrella", "wagon", "yogurt", "bucket", "cherry",
    "donkey", "eagle", "fossil", "guitar", "helmet", "jungle", "kitten", "lizard", "mirror",
)  # fmt: skip

VERBS: tuple[str, ...] = ("fetch", "lookup", "record", "register", "find", "reserve", "check")
LETTERS = "abcdefghjkmnpqrstuvwxyz"  # no i, l, o: nothing to misread
CODE_CHARS = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"


@frozen(kw_only=True)
class Paraphrase:
    statement: str
    paraphrase: str


@frozen(kw_only=True)
class Answer:
    question: str
    passage: str


PARAPHRASES: tuple[Paraphrase, ...] = (
    Paraphrase(
        statement="The cat is sleeping on the sofa.",
        paraphrase="A cat naps on the couch.",
    ),
    Paraphrase(
        statement="It is raining heavily in the city today.",
        paraphrase="There is a downpour in town this afternoon.",
    ),
    Paraphrase(
        statement="She bought fresh bread at the bakery.",
        paraphrase="She purchased a new loaf from the baker.",
    ),
    Paraphrase(
        statement="The train to Berlin was delayed by an hour.",
        paraphrase="The Berlin train arrived sixty minutes late.",
    ),
    Paraphrase(
        statement="He repaired the broken bicycle wheel.",
        paraphrase="He fixed the damaged wheel of his bike.",
    ),
    Paraphrase(
        statement="The children are playing football in the park.",
        paraphrase="Kids are kicking a soccer ball around the park.",
    ),
    Paraphrase(
        statement="The stock market fell sharply this morning.",
        paraphrase="Share prices dropped steeply early today.",
    ),
    Paraphrase(
        statement="Please turn off the lights when you leave.",
        paraphrase="Switch the lights off as you go out.",
    ),
    Paraphrase(
        statement="The doctor prescribed medicine for her cough.",
        paraphrase="The physician gave her a drug to treat the cough.",
    ),
    Paraphrase(
        statement="Our flight to Tokyo leaves at noon.",
        paraphrase="The plane to Tokyo departs at midday.",
    ),
    Paraphrase(
        statement="The old library closed its doors last year.",
        paraphrase="The historic library shut down a year ago.",
    ),
    Paraphrase(
        statement="The soup needs more salt.",
        paraphrase="This soup is not salty enough.",
    ),
    Paraphrase(
        statement="The river flooded the village after the storm.",
        paraphrase="After the storm, the river overflowed into the village.",
    ),
    Paraphrase(
        statement="My laptop battery dies very quickly.",
        paraphrase="The battery in my notebook computer runs out fast.",
    ),
)

ANSWERS: tuple[Answer, ...] = (
    Answer(
        question="What do cats like to eat?",
        passage="Cats are carnivores and mostly eat meat and fish.",
    ),
    Answer(
        question="Why is the sky blue?",
        passage="The sky looks blue because air scatters the short blue wavelengths of sunlight.",
    ),
    Answer(
        question="When does the bakery open?",
        passage="The bakery opens its doors at seven o'clock every morning.",
    ),
    Answer(
        question="How long does the train from Paris to Berlin take?",
        passage="The direct train from Paris reaches Berlin in about eight hours.",
    ),
    Answer(
        question="How do I fix a flat bicycle tyre?",
        passage="To fix a flat tyre, remove the inner tube, patch the hole and pump it up again.",
    ),
    Answer(
        question="How many players does a football team have on the field?",
        passage="A football team has eleven players on the field, one of them the goalkeeper.",
    ),
    Answer(
        question="What is a stock market index?",
        passage="A stock market index tracks the combined share prices of a group of companies.",
    ),
    Answer(
        question="How do I reset my password?",
        passage="To reset your password, click 'Forgot password' on the login page.",
    ),
    Answer(
        question="How many legs does a spider have?",
        passage="A spider has eight legs, while an insect has six.",
    ),
    Answer(
        question="What is the capital of Japan?",
        passage="Tokyo is the capital city of Japan.",
    ),
    Answer(
        question="Who wrote Romeo and Juliet?",
        passage="Romeo and Juliet is a tragedy written by William Shakespeare.",
    ),
    Answer(
        question="How long should I boil an egg?",
        passage="Boil an egg for about nine minutes to get a firm yolk.",
    ),
    Answer(
        question="What causes tides in the ocean?",
        passage="Ocean tides are caused mainly by the gravitational pull of the Moon.",
    ),
    Answer(
        question="How tall is Mount Everest?",
        passage="Mount Everest rises about 8,849 metres above sea level.",
    ),
)
