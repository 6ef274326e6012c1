// The prompt-cache benchmark's prompts, the same for both engines: one shared prefix of
// `prefixChars` characters (a byte-vocabulary model: as many tokens) and a different
// 32-character question after it in each round.
export function prefixPrompts(prefixChars, n) {
  const words = "the quick brown fox jumps over the lazy dog while a system prompt describes every rule ".repeat(64);
  const prefix = words.slice(0, prefixChars);
  return Array.from({ length: n }, (_, k) => prefix + `question ${String(k).padStart(3, "0")}: what comes next?`.slice(0, 32));
}
