#!/usr/bin/env python3
"""Writes the example data files under data/ (deterministic: rerun to get the same bytes).

  data/pairs/numbers.tsv   English number words -> their three digits, e.g. "forty two<TAB>0 4 2"
  data/pairs/adder2.tsv    every sum of two 2-digit numbers, minGPT's adder: "4705<TAB>250" is 47 + 05 = 052,
                           the sum's three digits written lowest first (--tokenize chars)
  data/pairs/adder2_heldout.tsv  the 500 of those sums that minGPT's adder holds out as its test split
                           (--heldout-file: the same held-out sums for every seed and implementation)
  data/text/logbook.txt    a ship's logbook generated from a small grammar, for the character-level LM

All are original text written by this script, so the repository may ship them.
Usage: python3 scripts/tools/make_data.py [--out data]
"""
import argparse
import os
import random

from attnlab_runs.launch import ROOT

ONES = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
        "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"]
TENS = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]


def number_words(n):
    """0 <= n <= 999 in words, without 'and': 342 -> 'three hundred forty two'.
    The digits are written zero-padded to three, so each output position has one meaning."""
    words = []
    if n >= 100:
        words += [ONES[n // 100], "hundred"]
        n %= 100
        if n == 0:
            return " ".join(words)
    if n < 20:
        words.append(ONES[n])
    else:
        words.append(TENS[n // 10])
        if n % 10:
            words.append(ONES[n % 10])
    return " ".join(words)


def numbers_tsv(count, seed):
    rng = random.Random(seed)
    chosen = sorted(rng.sample(range(1000), count))
    rng.shuffle(chosen)
    return "".join(f"{number_words(n)}\t{' '.join(f'{n:03d}')}\n" for n in chosen)


def adder_tsv():
    """All 10,000 sums a + b of 0 <= a, b <= 99 as minGPT's adder writes them: the four input digits,
    then the sum's three digits reversed, so that the model writes the lowest digit (and its carry) first."""
    return "".join(f"{a:02d}{b:02d}\t{f'{a + b:03d}'[::-1]}\n" for a in range(100) for b in range(100))


def mt19937(seed):
    """The 32-bit outputs of the Mersenne Twister MT19937 seeded by init_genrand(seed), as a generator
    (the generator behind torch.Generator().manual_seed(seed) on the CPU)."""
    state = [seed & 0xFFFFFFFF]
    for i in range(1, 624):
        state.append((1812433253 * (state[-1] ^ (state[-1] >> 30)) + i) & 0xFFFFFFFF)
    while True:
        for i in range(624):
            y = (state[i] & 0x80000000) | (state[(i + 1) % 624] & 0x7FFFFFFF)
            state[i] = state[(i + 397) % 624] ^ (y >> 1) ^ (0x9908B0DF if y & 1 else 0)
        for y in state:
            y ^= y >> 11
            y ^= (y << 7) & 0x9D2C5680
            y ^= (y << 15) & 0xEFC60000
            yield y ^ (y >> 18)


def randperm(n, seed):
    """A permutation of range(n) by the Fisher-Yates swaps of torch.randperm(n) on the CPU: position i takes
    the element at i + (next output mod (n - i)). Equal to PyTorch 1.13's torch.randperm(n, generator=
    torch.Generator().manual_seed(seed)) (tests/test_torch_gpt_reference.py compares them where torch imports)."""
    out, draws = list(range(n)), mt19937(seed)
    for i in range(n - 1):
        j = i + next(draws) % (n - i)
        out[i], out[j] = out[j], out[i]
    return out


def adder_heldout_tsv():
    """minGPT's test split of the 2-digit adder: the sums numbered by the first 500 entries of randperm(10000)
    under seed 1337, sum k being a = k // 100, b = k % 100 (line k + 1 of adder2.tsv), in that order."""
    return "".join(f"{k // 100:02d}{k % 100:02d}\t{f'{k // 100 + k % 100:03d}'[::-1]}\n" for k in randperm(10000, 1337)[:500])


# ---- the logbook ----

SHIPS = ["Heron", "Marigold", "Fair Wind", "Osprey", "Saint Brendan"]
WINDS = ["north", "north-east", "east", "south-east", "south", "south-west", "west", "north-west"]
STRENGTH = ["calm", "light airs", "a light breeze", "a gentle breeze", "a fresh breeze", "a strong breeze", "a near gale",
            "a gale"]
SKY = ["clear", "fair with high cloud", "overcast", "grey and low", "broken cloud", "hazy", "rain in squalls",
       "fog at dawn, clearing by noon", "drizzle"]
SEA = ["smooth", "slight", "moderate", "rough", "a long swell from the west", "short and steep"]
SAILS = ["all plain sail", "the topsails reefed", "the mainsail double reefed", "the jib and staysail only",
         "bare poles for an hour"]
BIRDS = ["gulls", "terns", "a pair of gannets", "a petrel", "shearwaters", "an albatross", "a flock of small brown birds"]
FISH = ["dolphins", "a school of tuna", "flying fish", "a whale spouting to leeward", "a turtle asleep on the surface"]
WORK = ["mended the foresail", "scrubbed the deck", "tarred the rigging", "checked the water casks",
        "aired the bedding", "stowed the cable", "repaired a split block", "pumped the bilge"]
CREW = ["the cook", "the carpenter", "young Tom", "the second mate", "old Harris", "the boatswain", "the cabin boy"]
MOODS = ["in good spirits", "tired but cheerful", "quiet", "restless", "singing at the capstan", "grumbling about the biscuit"]
EVENTS = [
    "{crew} caught {n} fish before supper.",
    "{crew} sighted {fish} off the {side} bow.",
    "We saw {birds} at noon, a sign of land.",
    "{crew} reported a leak near the bow; it was found and caulked.",
    "The glass fell {tenths} tenths during the afternoon watch.",
    "A sail was seen to the {wind}, hull down; she did not answer our signal.",
    "{crew} was sick and kept to his hammock.",
    "We took a sight of the sun at noon and corrected our reckoning by {miles} miles.",
    "At dusk {crew} sang the old songs and the watch joined in.",
    "The wind backed to the {wind} in the night and we wore ship.",
]
SIDES = ["port", "starboard"]


def logbook(entries, seed):
    rng = random.Random(seed)
    ship = rng.choice(SHIPS)
    lat, lon = 48.0, 12.0
    out = [f"The logbook of the {ship}, kept by the master.\n\n"]
    for day in range(1, entries + 1):
        wind = rng.choice(WINDS)
        strength = rng.randrange(len(STRENGTH))
        miles = 20 + 15 * strength + rng.randrange(30)
        lat -= round(rng.uniform(0.05, 0.5), 1)
        lon += round(rng.uniform(-0.5, 0.6), 1)
        out.append(f"Day {day}. Wind {wind}, {STRENGTH[strength]}. Sky {rng.choice(SKY)}. Sea {rng.choice(SEA)}.\n")
        out.append(f"Under {rng.choice(SAILS)}. Run since noon yesterday {miles} miles. "
                   f"Position {lat:.1f} north, {lon:.1f} west.\n")
        for _ in range(rng.randrange(1, 4)):
            event = rng.choice(EVENTS).format(crew=rng.choice(CREW), fish=rng.choice(FISH), birds=rng.choice(BIRDS),
                                              side=rng.choice(SIDES), wind=rng.choice(WINDS), n=rng.randrange(2, 12),
                                              tenths=rng.randrange(1, 6), miles=rng.randrange(2, 15))
            out.append(event[0].upper() + event[1:] + "\n")
        out.append(f"The men {rng.choice(WORK)}. All hands {rng.choice(MOODS)}.\n\n")
    return "".join(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.path.join(ROOT, "data"))
    args = parser.parse_args()
    files = {
        os.path.join("pairs", "numbers.tsv"): numbers_tsv(600, seed=1),
        os.path.join("pairs", "adder2.tsv"): adder_tsv(),
        os.path.join("pairs", "adder2_heldout.tsv"): adder_heldout_tsv(),
        os.path.join("text", "logbook.txt"): logbook(150, seed=2),
    }
    for name, text in files.items():
        path = os.path.join(args.out, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        print(f"{os.path.relpath(path)}: {len(text.splitlines())} lines, {len(text.encode('utf-8'))} bytes")


if __name__ == "__main__":
    main()
