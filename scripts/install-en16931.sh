#!/usr/bin/env bash
# Installs the e-invoice validator into <repo>/.tools/en16931: Saxon-HE (the XSLT 3.0 processor)
# and the official validation artefacts, every one a pinned artifact of Maven Central fetched with
# `mvn dependency:copy` (sha256 checked below), and docline's runner (Validate.java) compiled with
# javac against Saxon. Skipped when .tools/en16931/.version holds the pins and the runner's hash.
# `.ci/run` runs it before the unit suite; the worker finds the folder itself (or EN16931_VALIDATOR).
#
#   net.sf.saxon:Saxon-HE                 the XSLT 2.0/3.0 processor (MPL 2.0), with its one runtime
#   org.xmlresolver:xmlresolver (+data)   dependency (Apache 2.0)
#   com.helger.phive.rules:               carries CEN/TC 434's EN 16931 validation artefacts, the
#     phive-rules-en16931                 schematron compiled to XSLT, unchanged, one folder per
#                                         release (external/schematron/<release>/{cii,ubl}/); we take
#                                         release EN16931_RELEASE
#   org.mustangproject:validator          carries FNFE-MPE's Factur-X schematron (one XSLT per
#                                         profile, MINIMUM to EXTENDED, with their code lists) and
#                                         AFNOR XP Z12-012's French rules BR-FR for CII
#
# Needs Java 17+ (java, javac, jar) and Maven 3 (mvn), as the Pub/Sub emulator already needs Java.
#
# Environment knobs:
#   MVN=/path/to/mvn         maven command (default: `mvn` on PATH)
#   EN16931_FORCE=1          reinstall even when the stamp matches
set -euo pipefail

SAXON="net.sf.saxon:Saxon-HE:12.9"
SAXON_SHA256="8f3a9216a537367132293eacbba9df062eace8f8b16a184af59e2e4839d4cd41"
XMLRESOLVER="org.xmlresolver:xmlresolver:5.3.3"
XMLRESOLVER_SHA256="1fe4d5b92f708dcdb82dbce12919e0171e6b5ca62c6dca6220483625098feb5f"
XMLRESOLVER_DATA="org.xmlresolver:xmlresolver:5.3.3:jar:data"
XMLRESOLVER_DATA_SHA256="b0c487ad2f3e558be8d829c916d2458d10aca6a5bafa7a4d0524b70845e48a5c"
PHIVE_EN16931="com.helger.phive.rules:phive-rules-en16931:4.3.7"
PHIVE_EN16931_SHA256="842998fe45911442b711300ab251e46489a9a5e2ffc02ddefc4293f8784c2662"
EN16931_RELEASE="1.3.16"
MUSTANG_VALIDATOR="org.mustangproject:validator:2.26.0"
MUSTANG_VALIDATOR_SHA256="5eb01741d59ed942812bc338ca0b2a4803c9a61469976e53264054611a49a250"
# Inside the Mustang validator: Factur-X 1.0.7 (ZUGFeRD 2.3) and XP Z12-012 (BR-FR, flux 2, CII).
FACTURX_FOLDER="xslt/ZF_250"
BR_FR_FILE="xslt/XP_Z12_012/20260216_BR-FR-Flux2-Schematron-CII_V1.3.0.xsl"

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(dirname "$script_dir")"
target="$repo_root/.tools/en16931"
runner="$repo_root/worker/src/adapters/e-invoice/validation/Validate.java"
stamp="$target/.version"
MVN="${MVN:-mvn}"

for tool in java javac jar "$MVN"; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "install-en16931: $tool not found (Java 17+ with javac and jar, and Maven 3 are needed)" >&2
    exit 1
  fi
done

# Checked before anything is fetched: `sha256sum` below runs inside a substitution, where a missing
# file would not stop the script (a build stage that forgot to copy the runner would fail minutes later).
if [[ ! -f "$runner" ]]; then
  echo "install-en16931: the runner $runner is missing" >&2
  exit 1
fi

pins="$SAXON $XMLRESOLVER $XMLRESOLVER_DATA $PHIVE_EN16931 $EN16931_RELEASE $MUSTANG_VALIDATOR $FACTURX_FOLDER $BR_FR_FILE"
version="$(printf '%s %s' "$pins" "$(sha256sum "$runner" | cut -d' ' -f1)" | sha256sum | cut -d' ' -f1)"
if [[ "${EN16931_FORCE:-0}" != "1" && -f "$stamp" && "$(cat "$stamp")" == "$version" ]]; then
  echo "install-en16931: Saxon-HE and the EN 16931 artefacts already installed, skipping"
  exit 0
fi

start=$(date +%s)
rm -rf "$target"
mkdir -p "$target/lib" "$target/jars" "$target/artefacts" "$target/classes"

# fetch COORDINATES SHA256 DIR: one artifact, without its dependencies, checked against its pin.
fetch() {
  local coordinates="$1" sha="$2" dir="$3"
  echo "install-en16931: $coordinates"
  "$MVN" -B -q -Dstyle.color=never dependency:copy -Dartifact="$coordinates" -DoutputDirectory="$dir" -Dmdep.overWriteReleases=true
  local group artifact ver classifier file
  IFS=: read -r group artifact ver _ classifier <<<"$coordinates"
  file="$dir/$artifact-$ver${classifier:+-$classifier}.jar"
  if [[ "$(sha256sum "$file" | cut -d' ' -f1)" != "$sha" ]]; then
    echo "install-en16931: $file does not have the pinned sha256 $sha" >&2
    exit 1
  fi
}

fetch "$SAXON" "$SAXON_SHA256" "$target/lib"
fetch "$XMLRESOLVER" "$XMLRESOLVER_SHA256" "$target/lib"
fetch "$XMLRESOLVER_DATA" "$XMLRESOLVER_DATA_SHA256" "$target/lib"
fetch "$PHIVE_EN16931" "$PHIVE_EN16931_SHA256" "$target/jars"
fetch "$MUSTANG_VALIDATOR" "$MUSTANG_VALIDATOR_SHA256" "$target/jars"

# The artefacts, taken out of their jars unchanged (with the JDK's jar tool).
mkdir -p "$target/jars/phive" "$target/jars/mustang" "$target/artefacts/en16931" "$target/artefacts/br-fr"
(cd "$target/jars/phive" && jar xf "../phive-rules-en16931-${PHIVE_EN16931##*:}.jar" "external/schematron/$EN16931_RELEASE/")
cp -r "$target/jars/phive/external/schematron/$EN16931_RELEASE/cii" "$target/artefacts/en16931/cii"
cp -r "$target/jars/phive/external/schematron/$EN16931_RELEASE/ubl" "$target/artefacts/en16931/ubl"
(cd "$target/jars/mustang" && jar xf "../validator-${MUSTANG_VALIDATOR##*:}.jar" "$FACTURX_FOLDER/" "$BR_FR_FILE")
cp -r "$target/jars/mustang/$FACTURX_FOLDER" "$target/artefacts/factur-x"
cp "$target/jars/mustang/$BR_FR_FILE" "$target/artefacts/br-fr/BR-FR-CII.xsl"
rm -rf "$target/jars/phive" "$target/jars/mustang"

classpath="$(find "$target/lib" -name '*.jar' | sort | tr '\n' ':')"
javac -quiet -nowarn -d "$target/classes" -cp "$classpath" "$runner" 2>/dev/null ||
  javac -d "$target/classes" -cp "$classpath" "$runner"

# What the worker reads: where the runner is, and which artefact is which (with its digest).
digest() { sha256sum "$target/artefacts/$1" | cut -d' ' -f1; }
cat >"$target/manifest.json" <<JSON
{
  "classpath": ["classes", $(find "$target/lib" -name '*.jar' -printf '"lib/%f", ' | sort | sed 's/, $//')],
  "mainClass": "Validate",
  "artefacts": {
    "en16931-cii": { "path": "en16931/cii/EN16931-CII-validation.xslt", "source": "CEN/TC 434 EN 16931 validation artefacts $EN16931_RELEASE (CII), via $PHIVE_EN16931", "sha256": "$(digest en16931/cii/EN16931-CII-validation.xslt)" },
    "en16931-ubl": { "path": "en16931/ubl/EN16931-UBL-validation.xslt", "source": "CEN/TC 434 EN 16931 validation artefacts $EN16931_RELEASE (UBL), via $PHIVE_EN16931", "sha256": "$(digest en16931/ubl/EN16931-UBL-validation.xslt)" },
    "factur-x-minimum": { "path": "factur-x/FACTUR-X_MINIMUM.xslt", "source": "FNFE-MPE Factur-X schematron, MINIMUM, via $MUSTANG_VALIDATOR", "sha256": "$(digest factur-x/FACTUR-X_MINIMUM.xslt)" },
    "factur-x-basic-wl": { "path": "factur-x/FACTUR-X_BASIC-WL.xslt", "source": "FNFE-MPE Factur-X schematron, BASIC WL, via $MUSTANG_VALIDATOR", "sha256": "$(digest factur-x/FACTUR-X_BASIC-WL.xslt)" },
    "factur-x-basic": { "path": "factur-x/FACTUR-X_BASIC.xslt", "source": "FNFE-MPE Factur-X schematron, BASIC, via $MUSTANG_VALIDATOR", "sha256": "$(digest factur-x/FACTUR-X_BASIC.xslt)" },
    "factur-x-en16931": { "path": "factur-x/FACTUR-X_EN16931.xslt", "source": "FNFE-MPE Factur-X schematron, EN 16931, via $MUSTANG_VALIDATOR", "sha256": "$(digest factur-x/FACTUR-X_EN16931.xslt)" },
    "factur-x-extended": { "path": "factur-x/FACTUR-X_EXTENDED.xslt", "source": "FNFE-MPE Factur-X schematron, EXTENDED, via $MUSTANG_VALIDATOR", "sha256": "$(digest factur-x/FACTUR-X_EXTENDED.xslt)" },
    "br-fr-cii": { "path": "br-fr/BR-FR-CII.xsl", "source": "AFNOR XP Z12-012 French rules BR-FR (flux 2, CII) V1.3.0, via $MUSTANG_VALIDATOR", "sha256": "$(digest br-fr/BR-FR-CII.xsl)" }
  }
}
JSON
rm -rf "$target/jars"
printf '%s\n' "$version" >"$stamp"
echo "install-en16931: installed in $(( $(date +%s) - start ))s ($(du -sh "$target" | cut -f1)) into $target"
