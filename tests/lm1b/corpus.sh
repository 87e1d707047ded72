# Sourced by the LM1B test scripts: a corpus with structure to learn, in the LM1B layout.
#   make_corpus DIR   training shards (3 x 300 sentences) and one held-out shard (80) under DIR

# gen SEED LINES: sentences from a small grammar, tokenized LM1B-style.
gen() {
  awk -v seed="$1" -v n="$2" 'BEGIN {
    srand(seed);
    split("the a one every this that", det, " ");
    split("king shepherd city river mountain servant prophet people house garden", noun, " ");
    split("saw built blessed crossed heard found loved kept", verb, " ");
    split("quickly slowly gladly there again today", adv, " ");
    for (i = 0; i < n; i++) {
      s = det[int(rand()*6)+1] " " noun[int(rand()*10)+1] " " verb[int(rand()*8)+1] " " det[int(rand()*6)+1] " " noun[int(rand()*10)+1];
      if (rand() < 0.5) s = s " " adv[int(rand()*6)+1];
      if (rand() < 0.3) s = s " , and " det[int(rand()*6)+1] " " noun[int(rand()*10)+1] " " verb[int(rand()*8)+1];
      print s " .";
    }
  }'
}

make_corpus() {
  local dir="$1" k
  mkdir -p "$dir/training-monolingual.tokenized.shuffled" "$dir/heldout-monolingual.tokenized.shuffled"
  for k in 1 2 3; do gen "$k" 300 > "$dir/training-monolingual.tokenized.shuffled/news.en-0000$k-of-00100"; done
  gen 99 80 > "$dir/heldout-monolingual.tokenized.shuffled/news.en.heldout-00000-of-00050"
}
