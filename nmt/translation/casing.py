"""Lines in capitals, translated as the model knows text (search.fold_case).

A model trained on sentence-case text reads an ALL CAPS or Title Case line as a string of
rare pieces and can loop on it. `fold` gives such a line in sentence case (its first letter
and words in capitals throughout, such as "USA" in a title, kept); `restore` puts an ALL CAPS
line's translation back in capitals. A Title Case line's translation keeps German's own
casing, which capitalises nouns and nothing else.
"""

from __future__ import annotations

UPPER, TITLE = "upper", "title"
MIN_LETTERS = 4  # "OK", "USA" or "I" alone stay as they are
MIN_TITLE_WORDS = 3
TITLE_SHARE = 0.8  # of the words with a letter: this share or more begin with a capital


def kind(line: str) -> str:
    """UPPER, TITLE or "" (neither)."""
    letters = list(filter(str.isalpha, line))
    if len(letters) < MIN_LETTERS:
        return ""
    if not any(map(str.islower, letters)):
        return UPPER
    words = [w for w in line.split() if any(map(str.isalpha, w))]
    if len(words) < MIN_TITLE_WORDS:
        return ""
    # each word's first letter (a word here holds one)
    capitalised = sum(1 for w in words if next(filter(str.isalpha, w)).isupper())
    return TITLE if capitalised >= TITLE_SHARE * len(words) else ""


def fold(line: str) -> tuple[str, str]:
    """(the line in sentence case, its kind); the line itself where its kind is ""."""
    found = kind(line)
    if not found:
        return line, ""
    out = []
    for i, word in enumerate(line.split(" ")):
        # a title's word in capitals throughout (an acronym) stays; the first word keeps its
        # first letter's capital
        if found == TITLE and sum(c.isupper() for c in word) > 1:
            out.append(word)
            continue
        lowered = word.lower()
        out.append(lowered[:1].upper() + lowered[1:] if i == 0 else lowered)
    return " ".join(out), found


def restore(translation: str, found: str) -> str:
    """The translation of a line of kind `found`, in that line's capitals."""
    return translation.upper() if found == UPPER else translation
