"""Characters per second of the character and the word tokenizer on 100k captions, as `encode()` calls them
(batches of 32 and 512 asked for as padded tensors), beside the character tokenizer's general per-character
path (`PreTrainedTokenizer`'s, what every call took before the vectorised path).

    python -m benchmarks.tokenizer_throughput [--quick] [--output tokenizers.json]
"""

import argparse
import sys

from utils.experiments import alternate, flickr8k_captions, write_results
from utils.result_tables import rate_cell
from hf_grounded import CharTokenizer
from hf_grounded.word_tokenizer import train_word_tokenizer


def batched(tokenizer, texts: list[str], batch_size: int, **options) -> int:
    for start in range(0, len(texts), batch_size):
        tokenizer(texts[start : start + batch_size], padding=True, truncation=True, **options)
    return sum(map(len, texts))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="Fewer repeats; the general path on 10k captions.")
    parser.add_argument("--captions", type=int, default=100_000)
    parser.add_argument("--output", default=None)
    args = parser.parse_args(argv)
    repeats = 3 if args.quick else 5
    data_name, captions = flickr8k_captions()
    texts = (captions * (args.captions // len(captions) + 1))[: args.captions]
    general_texts = texts[: 10_000 if args.quick else args.captions]
    char, word = CharTokenizer(), train_word_tokenizer(captions)
    arms = {
        "character, general path (lists, then padded), batch 512": lambda: batched(char, general_texts, 512),
        "character, vectorised (padded tensors), batch 32": lambda: batched(char, texts, 32, return_tensors="pt"),
        "character, vectorised (padded tensors), batch 512": lambda: batched(char, texts, 512, return_tensors="pt"),
        "word (tokenizers, padded tensors), batch 32": lambda: batched(word, texts, 32, return_tensors="pt"),
        "word (tokenizers, padded tensors), batch 512": lambda: batched(word, texts, 512, return_tensors="pt"),
    }
    results = alternate(arms, repeats, warmup=False)
    print(f"{len(texts):,} captions of the {data_name} ({sum(map(len, texts)):,} characters)")
    print("| tokenizer | million characters/s |")
    print("|---|---|")
    rows = []
    for name, result in results.items():
        scaled = {key: value / 1e6 for key, value in result.items() if key in ("min", "median", "max")}
        rows.append({"tokenizer": name, **result})
        print(f"| {name} | {rate_cell(scaled, 2)} |")
    write_results(args.output, "tokenizer_throughput", rows, {"captions": len(texts), "repeats": repeats})


if __name__ == "__main__":
    main(sys.argv[1:])
