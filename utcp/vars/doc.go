// Package vars holds the operator's values of the ${VAR} references of
// UTCP call templates (package manual says where one may stand), and the
// secrets they make.
//
// A variable of a manual is looked up under its namespaced key,
// NamespacedKey(manual, VAR) (`demo_shop` + `API_TOKEN` →
// `demo__shop_API_TOKEN`): in the configured variables, then the loaders,
// in order (a .env file, ParseDotEnv; a directory of files, LoadSecretDir;
// the environment variables the operator lists; any Loader). A Resolver
// does it. There is no fallback to the bare name nor to the process's
// environment, and a key binds only the one pair ParseNamespacedKey reads
// from it. A variable with no value is a *NotFoundError naming the key
// (CheckBound, at registration), and is never sent (SubstituteTemplate).
//
// Every value bound to a manual is one of its Secrets (and so is an
// OAuth2 token fetched with them, Secrets.Add): a provider's message shown
// to a caller or logged has them replaced (Conceal), and an error type or
// code that holds one is withheld (Withholds).
package vars
