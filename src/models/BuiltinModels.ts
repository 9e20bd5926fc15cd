/**
 * The model catalogue that ships with the service: public list prices in USD
 * per million tokens. Every new organisation starts with these enabled and may
 * change rates or add its own (`billing model set`). A null cache rate means the
 * provider has no such price.
 */
export interface ModelRates {
  readonly id: string
  readonly name: string
  readonly input: string
  readonly output: string
  readonly cacheRead: string | null
  readonly cacheWrite: string | null
}

export const builtinModels: ReadonlyArray<ModelRates> = [
  { id: "gpt-4o", name: "GPT-4o", input: "2.5", output: "10", cacheRead: "1.25", cacheWrite: null },
  { id: "gpt-4o-mini", name: "GPT-4o mini", input: "0.15", output: "0.6", cacheRead: "0.075", cacheWrite: null },
  { id: "gpt-4.1", name: "GPT-4.1", input: "2", output: "8", cacheRead: "0.5", cacheWrite: null },
  { id: "gpt-4.1-mini", name: "GPT-4.1 mini", input: "0.4", output: "1.6", cacheRead: "0.1", cacheWrite: null },
  { id: "o3", name: "OpenAI o3", input: "2", output: "8", cacheRead: "0.5", cacheWrite: null },
  { id: "o4-mini", name: "OpenAI o4-mini", input: "1.1", output: "4.4", cacheRead: "0.275", cacheWrite: null },
  { id: "claude-opus-4", name: "Claude Opus 4", input: "15", output: "75", cacheRead: "1.5", cacheWrite: "18.75" },
  { id: "claude-sonnet-4", name: "Claude Sonnet 4", input: "3", output: "15", cacheRead: "0.3", cacheWrite: "3.75" },
  { id: "claude-3-5-haiku", name: "Claude 3.5 Haiku", input: "0.8", output: "4", cacheRead: "0.08", cacheWrite: "1" },
  { id: "gemini-2.5-pro", name: "Gemini 2.5 Pro", input: "1.25", output: "10", cacheRead: "0.31", cacheWrite: null },
  { id: "gemini-2.5-flash", name: "Gemini 2.5 Flash", input: "0.3", output: "2.5", cacheRead: "0.075", cacheWrite: null },
  { id: "mistral-large", name: "Mistral Large", input: "2", output: "6", cacheRead: null, cacheWrite: null },
  { id: "deepseek-chat", name: "DeepSeek V3", input: "0.27", output: "1.1", cacheRead: "0.07", cacheWrite: null }
]
