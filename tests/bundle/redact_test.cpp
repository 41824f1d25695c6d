#include "bundle/redact.h"
#include "bundle/secret_corpus.h"
#include "util/json.h"

#include <catch2/catch.hpp>

namespace replay::bundle {
namespace {

TEST_CASE("names that say their value is a secret are recognised, word by word", "[bundle]") {
  for (const char* name : {"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "WANDB_API_KEY", "GITHUB_TOKEN",
                           "db-password", "apiKey", "MYSQL_PASSWD", "GOOGLE_APPLICATION_CREDENTIALS", "AUTH",
                           "NPM_AUTH_TOKEN", "ACCESSTOKEN"}) {
    INFO(name);
    CHECK(IsSecretName(name));
  }
  for (const char* name : {"TOKENIZERS_PARALLELISM", "NCCL_SSL_KEY_FILE", "KEY_SIZE", "MASTER_ADDR", "OMPI_MCA_btl",
                           "PATH", "MONKEY", "NCCL_IB_HCA", "SECRET_PATH"}) {
    INFO(name);
    CHECK(!IsSecretName(name));
  }
}

TEST_CASE("well-known token formats are secrets whatever their name", "[bundle]") {
  CHECK(LooksLikeToken("ghp_0123456789abcdefghijABCDEFGHIJ"));
  CHECK(LooksLikeToken("hf_QpZrT8wXy2LmN4vB6cD8eF0gH2jK4lM6nP"));
  CHECK(LooksLikeToken("AKIAIOSFODNN7EXAMPLE"));
  CHECK(LooksLikeToken("Bearer eyJhbGciOiJIUzI1NiJ9"));
  CHECK(!LooksLikeToken("hf_small"));
  CHECK(!LooksLikeToken("/usr/lib/x86_64-linux-gnu"));
  CHECK(!LooksLikeToken("^openib"));
}

TEST_CASE("a password in a URL is replaced and the rest of the URL kept", "[bundle]") {
  Redactor r;
  std::string why;
  std::string v = r.RedactValue("MLFLOW_TRACKING_URI", "https://alice:pa55word@mlflow.example.com:5000/a?b=c", &why);
  CHECK(v == "https://alice:[REDACTED:1]@mlflow.example.com:5000/a?b=c");
  CHECK(why == "credentials in URL");
  // A user name alone is not a secret; a token in its place is.
  CHECK(r.RedactValue("GIT_URL", "ssh://git@github.com/o/r", &why) == "ssh://git@github.com/o/r");
  CHECK(why.empty());
  CHECK(r.RedactValue("REPO", "https://ghp_0123456789abcdefghijABCDEFGHIJ@github.com/o/r", &why) ==
        "https://[REDACTED:2]@github.com/o/r");
}

TEST_CASE("a secret assigned inside another value is replaced", "[bundle]") {
  Redactor r;
  std::string why;
  CHECK(r.RedactValue("OMPI_MCA_mca_base_env_list", "FOO=1;HF_TOKEN=abc123;BAR=2", &why) ==
        "FOO=1;HF_TOKEN=[REDACTED:1];BAR=2");
  CHECK(why == "secret assigned inside the value");
  CHECK(r.RedactValue("TORCH_ARGS", "--lr=0.1 --api-key=xyz", &why) == "--lr=0.1 --api-key=[REDACTED:2]");
  CHECK(r.RedactValue("OMPI_MCA_btl", "self,vader", &why) == "self,vader");
  CHECK(why.empty());
}

TEST_CASE("equal secrets get equal placeholders and different ones different", "[bundle]") {
  Redactor r;
  RankHeader a, b;
  a.rank = 0;
  b.rank = 1;
  a.environment = {{"HF_TOKEN", "same-token-value"}, {"WANDB_API_KEY", "first"}};
  b.environment = {{"HF_TOKEN", "same-token-value"}, {"WANDB_API_KEY", "second"}};
  r.RedactHeader(&a);
  r.RedactHeader(&b);
  CHECK(a.environment[0].second == b.environment[0].second);
  CHECK(a.environment[1].second != b.environment[1].second);
  CHECK(r.secrets() == 3);
  REQUIRE(r.records().size() == 2);
  CHECK(r.records()[0].name == "HF_TOKEN");
  CHECK(r.records()[0].ranks == std::vector<int32_t>{0, 1});
  CHECK(r.records()[1].placeholders.size() == 2);
}

TEST_CASE("command lines lose option values, assignments and tokens that are secrets", "[bundle]") {
  Redactor r;
  JobManifest m;
  m.command = {"mpirun", "-x", "HF_TOKEN=abc123secretvalue", "./train", "--password", "letmein", "--db-password=xyz",
               "--lr", "0.1", "hf_QpZrT8wXy2LmN4vB6cD8eF0gH2jK4lM6nP"};
  r.RedactManifest(&m);
  CHECK(m.command[2] == "HF_TOKEN=[REDACTED:1]");
  CHECK(m.command[5] == "[REDACTED:2]");
  CHECK(m.command[6] == "--db-password=[REDACTED:3]");
  CHECK(m.command[8] == "0.1");
  CHECK(m.command[9] == "[REDACTED:4]");
  nlohmann::json j = r.RecordsJson();
  REQUIRE(j.size() == 4);
  CHECK(j[0]["where"] == "manifest command");
  CHECK(!j[0].contains("ranks"));
}

TEST_CASE("every form of secret in the corpus is replaced, and the words around it kept", "[bundle]") {
  Redactor r;
  for (const SecretForm& f : SecretCorpus()) {
    std::string shown;
    if (f.variable.empty()) {
      for (const std::string& a : r.RedactCommand(f.argv, "command line", 0)) shown += a + "\n";
    } else {
      std::string why;
      shown = r.RedactValue(f.variable, f.argv[0], &why);
      CHECK(!why.empty());
    }
    INFO(f.form << ": " << shown);
    CHECK(shown.find(f.secret) == std::string::npos);
    CHECK(shown.find("[REDACTED:") != std::string::npos);
    if (!f.kept.empty()) CHECK(shown.find(f.kept) != std::string::npos);
  }
  CHECK(SecretCorpus().size() >= 30);
  // The records name options and variables, never a value.
  const std::string records = r.RecordsJson().dump();
  for (const SecretForm& f : SecretCorpus()) {
    INFO(f.form);
    CHECK(records.find(f.secret) == std::string::npos);
  }
}

TEST_CASE("words that only resemble secrets are left as they are", "[bundle]") {
  Redactor r;
  const std::vector<std::string> argv = {"mpirun", "-np", "4", "-x", "NCCL_DEBUG=INFO", "--mca", "btl", "self,vader",
                                         "python", "train.py", "--lr=0.1", "--tokenizer", "gpt2", "--keys-file",
                                         "k.txt", "--batch", "32", "https://example.com/a?b=c", "ssh://git@host/r"};
  CHECK(r.RedactCommand(argv, "command line", 0) == argv);
  std::string why;
  CHECK(r.RedactValue("OMPI_ARGV", "--lr 0.1 --steps 10", &why) == "--lr 0.1 --steps 10");
  CHECK(why.empty());
  CHECK(r.secrets() == 0);
}

TEST_CASE("free text keeps its blanks and loses its secrets", "[bundle]") {
  Redactor r;
  std::string why;
  CHECK(r.RedactText("a  --password\tpw1 b", &why) == "a  --password\t[REDACTED:1] b");
  CHECK(why == "secret option inside the value");
  CHECK(r.RedactText("curl -H 'Authorization: Bearer abcdefgh1234'", &why) ==
        "curl -H 'Authorization: Bearer [REDACTED:2]'");
  CHECK(r.RedactText(R"({"user": "bob", "password": "pw3"})", &why) == R"({"user": "bob", "password": "[REDACTED:3]"})");
  CHECK(r.RedactText(R"({"api_key":"k4","lr":0.1})", &why) == R"({"api_key":"[REDACTED:4]","lr":0.1})");
  // Equal secrets, equal placeholders.
  CHECK(r.RedactText("--token pw1", &why) == "--token [REDACTED:1]");
}

}  // namespace
}  // namespace replay::bundle
