// secret_corpus.h: the forms in which credentials reach a recorded job's
// command line and environment, for the tests of what replay shares.
//
// Every secret is distinct and appears nowhere else, so a test can search any
// output for it; `kept` is a neighbouring word that is not a secret and must
// survive.
#pragma once

#include <string>
#include <vector>

namespace replay::bundle {

struct SecretForm {
  const char* form;               // what the case is, for failure messages
  std::vector<std::string> argv;  // command-line words; for a variable, argv[0] is its value
  std::string variable;           // empty: a command line
  std::string secret;
  std::string kept;               // a word that must stay (empty: none)
};

inline const std::vector<SecretForm>& SecretCorpus() {
  static const std::vector<SecretForm> corpus = {
      // Options, with = and with a space.
      {"--password X", {"./train", "--password", "S01-pw-space"}, "", "S01-pw-space", "./train"},
      {"--password=X", {"./train", "--password=S02-pw-equals"}, "", "S02-pw-equals", "--password="},
      {"--token ghp_", {"./train", "--token", "ghp_S03aaaaaaaaaaaaaaaaaaaaaaaaaaa"}, "", "ghp_S03aaaaaaaaaaaaaaaaaaaaaaaaaaa", "--token"},
      {"--db-pass X", {"./train", "--db-pass", "S04-db-pass"}, "", "S04-db-pass", "--db-pass"},
      {"-p X", {"mysql", "-u", "root", "-p", "S05-short-p"}, "", "S05-short-p", "root"},
      {"--api-key X", {"./train", "--api-key", "S06-api-key", "--lr", "0.1"}, "", "S06-api-key", "0.1"},
      {"--api-key=X", {"./train", "--api-key=S07-api-key"}, "", "S07-api-key", "--api-key="},
      {"--secret X", {"./train", "--secret", "S08-secret"}, "", "S08-secret", "--secret"},
      {"--client-secret X", {"./train", "--client-secret", "S09-client"}, "", "S09-client", "--client-secret"},
      {"--passphrase X", {"./train", "--passphrase", "S10-phrase"}, "", "S10-phrase", "--passphrase"},
      {"--auth X", {"./train", "--auth", "S11-auth"}, "", "S11-auth", "--auth"},
      {"--cookie X", {"./train", "--cookie", "S12-cookie"}, "", "S12-cookie", "--cookie"},
      {"--pw X", {"./train", "--pw", "S13-pw"}, "", "S13-pw", "--pw"},
      {"--credentials X", {"./train", "--credentials", "S14-cred"}, "", "S14-cred", "--credentials"},
      // Headers.
      {"-H 'Authorization: Bearer X'", {"curl", "-H", "Authorization: Bearer S15-bearer-token"}, "", "S15-bearer-token", "Authorization: Bearer"},
      {"Authorization: Bearer X, three words", {"curl", "--header", "Authorization:", "Bearer", "S16-split-bearer"}, "", "S16-split-bearer", "Bearer"},
      {"X-Api-Key: X", {"curl", "-H", "X-Api-Key: S17-header"}, "", "S17-header", "X-Api-Key:"},
      {"Authorization: Basic X", {"curl", "-H", "Authorization: Basic S18dXNlcjpwYXNz"}, "", "S18dXNlcjpwYXNz", "Basic"},
      // URLs.
      {"user:password@ in a URL", {"./train", "https://alice:S19-url-pw@mlflow.example.com/x"}, "", "S19-url-pw", "@mlflow.example.com/x"},
      {"a token as the URL's user", {"git", "clone", "https://S20tokentokentoken@github.com/o/r"}, "", "S20tokentokentoken", "@github.com/o/r"},
      {"?access_token= in a URL", {"./train", "--url", "https://h/api?access_token=S21-query&page=2"}, "", "S21-query", "page=2"},
      // Tokens by their known prefixes.
      {"hf_ token", {"./train", "hf_S22aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}, "", "hf_S22aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "./train"},
      {"AWS access key id", {"./train", "AKIAS23EXAMPLEKEYABC"}, "", "AKIAS23EXAMPLEKEYABC", "./train"},
      {"sk- token", {"./train", "sk-S24aaaaaaaaaaaaaaaaaaaaaa"}, "", "sk-S24aaaaaaaaaaaaaaaaaaaaaa", "./train"},
      {"Slack xoxb- token", {"./train", "xoxb-S25slacktoken"}, "", "xoxb-S25slacktoken", "./train"},
      {"GitLab glpat- token", {"./train", "glpat-S26gitlabtokenaaaa"}, "", "glpat-S26gitlabtokenaaaa", "./train"},
      {"github_pat_ token", {"./train", "github_pat_S27aaaaaaaaaaaaaaaaaaaa"}, "", "github_pat_S27aaaaaaaaaaaaaaaaaaaa", "./train"},
      // Configuration text as an argument.
      {"JSON with blanks", {"./train", "--config", R"({"user": "bob", "password": "S28-json-pw"})"}, "", "S28-json-pw", "bob"},
      {"compact JSON", {"./train", "--config", R"({"api_key":"S29-json-compact","lr":0.1})"}, "", "S29-json-compact", "\"lr\":0.1"},
      {"YAML", {"./train", "--config", "db:\n  password: S30-yaml-pw\n  host: db1"}, "", "S30-yaml-pw", "host: db1"},
      {"dotted key=value", {"./train", "--set", "auth.token=S31-dotted"}, "", "S31-dotted", "auth.token="},
      // Assignments on the command line.
      {"env NAME=X", {"env", "HF_TOKEN=S32-env-assign", "./train"}, "", "S32-env-assign", "./train"},
      {"mpirun -x NAME=X", {"mpirun", "-x", "WANDB_API_KEY=S33-mpirun-x", "./train"}, "", "S33-mpirun-x", "-x"},
      // Variables.
      {"a secret name", {"S34-plain"}, "GITHUB_TOKEN", "S34-plain", ""},
      {"--token X inside another variable", {"--token S35-in-other"}, "MASTER_PORT", "S35-in-other", "--token"},
      {"OMPI_ARGV", {"--lr 0.1 --api-key S36-ompi-argv"}, "OMPI_ARGV", "S36-ompi-argv", "--lr 0.1"},
      {"REPLAY_COMMAND", {"python\x1ftrain.py\x1f--password\x1fS37-replay-cmd"}, "REPLAY_COMMAND", "S37-replay-cmd", "train.py"},
      {"an environment list", {"FOO=1;HF_TOKEN=S38-env-list;BAR=2"}, "OMPI_MCA_mca_base_env_list", "S38-env-list", "BAR=2"},
      {"a password in a database URL", {"postgres://u:S39-db-url@db:5432/x"}, "DATABASE_URL", "S39-db-url", "@db:5432/x"},
      {"a header in a variable", {"Authorization: Bearer S40-header-env"}, "EXTRA_HEADERS", "S40-header-env", "Authorization:"},
      {"a token in any variable", {"ghp_S41aaaaaaaaaaaaaaaaaaaaaaaaaaa"}, "SOMETHING", "ghp_S41aaaaaaaaaaaaaaaaaaaaaaaaaaa", ""},
  };
  return corpus;
}

}  // namespace replay::bundle
