package toolgate.lib

# --- Unicode lookalikes in identifiers -----------------------------------------------------
#
# An identifier (IBAN, account id, user name, domain) that mixes scripts or uses characters
# that look like ASCII ones ("ſ" for "s", Cyrillic "а" for "a", full-width digits) is a
# classic way to pass for a known one. Contracts should accept ASCII only for identifiers
# (JSON Schema `pattern`); these helpers are the policy-side check.

# Characters that look like an ASCII character (or like nothing: invisible characters), mapped
# to it: a small, documented subset of Unicode's confusables (UTS #39) covering Latin
# lookalikes, the Cyrillic and Greek letters that look Latin, full-width ASCII, invisible
# characters and unusual spaces.
confusables := {
	"\u00A0": " ", # NO-BREAK SPACE
	"\u00AD": "", # SOFT HYPHEN
	"\u0131": "i", # LATIN SMALL LETTER DOTLESS I
	"\u017F": "s", # LATIN SMALL LETTER LONG S
	"\u01C0": "l", # LATIN LETTER DENTAL CLICK
	"\u0251": "a", # LATIN SMALL LETTER ALPHA
	"\u0261": "g", # LATIN SMALL LETTER SCRIPT G
	"\u0391": "A", # GREEK CAPITAL LETTER ALPHA
	"\u0392": "B", # GREEK CAPITAL LETTER BETA
	"\u0395": "E", # GREEK CAPITAL LETTER EPSILON
	"\u0396": "Z", # GREEK CAPITAL LETTER ZETA
	"\u0397": "H", # GREEK CAPITAL LETTER ETA
	"\u0399": "I", # GREEK CAPITAL LETTER IOTA
	"\u039A": "K", # GREEK CAPITAL LETTER KAPPA
	"\u039C": "M", # GREEK CAPITAL LETTER MU
	"\u039D": "N", # GREEK CAPITAL LETTER NU
	"\u039F": "O", # GREEK CAPITAL LETTER OMICRON
	"\u03A1": "P", # GREEK CAPITAL LETTER RHO
	"\u03A4": "T", # GREEK CAPITAL LETTER TAU
	"\u03A5": "Y", # GREEK CAPITAL LETTER UPSILON
	"\u03A7": "X", # GREEK CAPITAL LETTER CHI
	"\u03B1": "a", # GREEK SMALL LETTER ALPHA
	"\u03B9": "i", # GREEK SMALL LETTER IOTA
	"\u03BA": "k", # GREEK SMALL LETTER KAPPA
	"\u03BD": "v", # GREEK SMALL LETTER NU
	"\u03BF": "o", # GREEK SMALL LETTER OMICRON
	"\u03C1": "p", # GREEK SMALL LETTER RHO
	"\u03C5": "u", # GREEK SMALL LETTER UPSILON
	"\u0405": "S", # CYRILLIC CAPITAL LETTER DZE
	"\u0406": "I", # CYRILLIC CAPITAL LETTER BYELORUSSIAN-UKRAINIAN I
	"\u0408": "J", # CYRILLIC CAPITAL LETTER JE
	"\u0410": "A", # CYRILLIC CAPITAL LETTER A
	"\u0412": "B", # CYRILLIC CAPITAL LETTER VE
	"\u0415": "E", # CYRILLIC CAPITAL LETTER IE
	"\u0417": "3", # CYRILLIC CAPITAL LETTER ZE
	"\u041A": "K", # CYRILLIC CAPITAL LETTER KA
	"\u041C": "M", # CYRILLIC CAPITAL LETTER EM
	"\u041D": "H", # CYRILLIC CAPITAL LETTER EN
	"\u041E": "O", # CYRILLIC CAPITAL LETTER O
	"\u0420": "P", # CYRILLIC CAPITAL LETTER ER
	"\u0421": "C", # CYRILLIC CAPITAL LETTER ES
	"\u0422": "T", # CYRILLIC CAPITAL LETTER TE
	"\u0423": "Y", # CYRILLIC CAPITAL LETTER U
	"\u0425": "X", # CYRILLIC CAPITAL LETTER HA
	"\u0430": "a", # CYRILLIC SMALL LETTER A
	"\u0431": "6", # CYRILLIC SMALL LETTER BE
	"\u0435": "e", # CYRILLIC SMALL LETTER IE
	"\u043E": "o", # CYRILLIC SMALL LETTER O
	"\u0440": "p", # CYRILLIC SMALL LETTER ER
	"\u0441": "c", # CYRILLIC SMALL LETTER ES
	"\u0443": "y", # CYRILLIC SMALL LETTER U
	"\u0445": "x", # CYRILLIC SMALL LETTER HA
	"\u044C": "b", # CYRILLIC SMALL LETTER SOFT SIGN
	"\u0455": "s", # CYRILLIC SMALL LETTER DZE
	"\u0456": "i", # CYRILLIC SMALL LETTER BYELORUSSIAN-UKRAINIAN I
	"\u0458": "j", # CYRILLIC SMALL LETTER JE
	"\u04AE": "Y", # CYRILLIC CAPITAL LETTER STRAIGHT U
	"\u04BB": "h", # CYRILLIC SMALL LETTER SHHA
	"\u04C0": "I", # CYRILLIC LETTER PALOCHKA
	"\u04CF": "l", # CYRILLIC SMALL LETTER PALOCHKA
	"\u0501": "d", # CYRILLIC SMALL LETTER KOMI DE
	"\u051A": "Q", # CYRILLIC CAPITAL LETTER QA
	"\u051B": "q", # CYRILLIC SMALL LETTER QA
	"\u051C": "W", # CYRILLIC CAPITAL LETTER WE
	"\u051D": "w", # CYRILLIC SMALL LETTER WE
	"\u1D00": "A", # LATIN LETTER SMALL CAPITAL A
	"\u2007": " ", # FIGURE SPACE
	"\u200B": "", # ZERO WIDTH SPACE
	"\u200C": "", # ZERO WIDTH NON-JOINER
	"\u200D": "", # ZERO WIDTH JOINER
	"\u202F": " ", # NARROW NO-BREAK SPACE
	"\u2060": "", # WORD JOINER
	"\u212A": "K", # KELVIN SIGN
	"\u212B": "A", # ANGSTROM SIGN
	"\u3000": " ", # IDEOGRAPHIC SPACE
	"\uFEFF": "", # ZERO WIDTH NO-BREAK SPACE
	# FULLWIDTH DIGIT ZERO..NINE, FULLWIDTH LATIN CAPITAL LETTER A..Z, FULLWIDTH LATIN SMALL LETTER A..Z
	"\uFF10": "0", "\uFF11": "1", "\uFF12": "2", "\uFF13": "3", "\uFF14": "4", "\uFF15": "5", "\uFF16": "6",
	"\uFF17": "7", "\uFF18": "8", "\uFF19": "9",
	"\uFF21": "A", "\uFF22": "B", "\uFF23": "C", "\uFF24": "D", "\uFF25": "E", "\uFF26": "F", "\uFF27": "G",
	"\uFF28": "H", "\uFF29": "I", "\uFF2A": "J", "\uFF2B": "K", "\uFF2C": "L", "\uFF2D": "M", "\uFF2E": "N",
	"\uFF2F": "O", "\uFF30": "P", "\uFF31": "Q", "\uFF32": "R", "\uFF33": "S", "\uFF34": "T", "\uFF35": "U",
	"\uFF36": "V", "\uFF37": "W", "\uFF38": "X", "\uFF39": "Y", "\uFF3A": "Z",
	"\uFF41": "a", "\uFF42": "b", "\uFF43": "c", "\uFF44": "d", "\uFF45": "e", "\uFF46": "f", "\uFF47": "g",
	"\uFF48": "h", "\uFF49": "i", "\uFF4A": "j", "\uFF4B": "k", "\uFF4C": "l", "\uFF4D": "m", "\uFF4E": "n",
	"\uFF4F": "o", "\uFF50": "p", "\uFF51": "q", "\uFF52": "r", "\uFF53": "s", "\uFF54": "t", "\uFF55": "u",
	"\uFF56": "v", "\uFF57": "w", "\uFF58": "x", "\uFF59": "y", "\uFF5A": "z",
}

# `s` is printable ASCII only (U+0020-U+007E).
ascii_printable(s) if {
	is_string(s)
	regex.match(`^[\x20-\x7e]*$`, s)
}

# `s` with every confusable character replaced by the ASCII one it looks like.
skeleton(s) := strings.replace_n(confusables, s) if is_string(s)

# `s` holds a character that looks like an ASCII one but is not. Every confusable is outside
# ASCII, so an ASCII string has none, and its skeleton (a replacer built from the whole table)
# is not computed.
has_confusable(s) if {
	is_string(s)
	regex.match(`[^\x00-\x7f]`, s)
	skeleton(s) != s
}

# `candidate` looks like `reference` (same skeleton) but is a different string.
lookalike(candidate, reference) if {
	candidate != reference
	skeleton(candidate) == skeleton(reference)
}

_scripts := {
	"arabic": `\p{Arabic}`, "armenian": `\p{Armenian}`, "cherokee": `\p{Cherokee}`, "cyrillic": `\p{Cyrillic}`,
	"greek": `\p{Greek}`, "han": `\p{Han}`, "hebrew": `\p{Hebrew}`, "latin": `\p{Latin}`,
}

# The scripts of the letters in `s` (of: arabic, armenian, cherokee, cyrillic, greek, han,
# hebrew, latin).
scripts_of(s) := {script | some script, pattern in _scripts; regex.match(pattern, s)} if is_string(s)

# `s` mixes letters of several scripts ("pаypal" with a Cyrillic "а").
mixed_script(s) if count(scripts_of(s)) > 1

# `s` is an identifier a policy can compare safely: printable ASCII, so no lookalike letters,
# no mixed scripts and no invisible characters.
safe_identifier(s) if {
	is_string(s)
	ascii_printable(s)
}
