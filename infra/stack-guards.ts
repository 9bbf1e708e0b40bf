import * as gcp from '@pulumi/gcp';
import * as pulumi from '@pulumi/pulumi';
import { SETTINGS, type SettingDeclaration, type SettingKey } from '../worker/src/contract/settings';

/**
 * Checks that depend on more than one key, or on what the stack deployed before: where the worker
 * runs against where the data lives, and the knobs that a running stack must never change in place.
 * Pure functions, so the rules are testable without Pulumi; {@link readDeployed} is the one reader.
 */

/**
 * The Cloud regions inside each multi-region a docline stack can keep its data in. EU: the regions
 * in member states of the European Union (Google's EU multi-region stores data only there), so
 * London (europe-west2) and Zurich (europe-west6) are outside. US: the regions in the United
 * States (the northamerica-* regions are in Canada and Mexico).
 */
export const MULTI_REGION_MEMBERS: Readonly<Record<string, readonly string[]>> = Object.freeze({
  EU: [
    'europe-central2',
    'europe-north1',
    'europe-north2',
    'europe-southwest1',
    'europe-west1',
    'europe-west3',
    'europe-west4',
    'europe-west8',
    'europe-west9',
    'europe-west10',
    'europe-west12',
  ],
  US: [
    'us-central1',
    'us-east1',
    'us-east4',
    'us-east5',
    'us-south1',
    'us-west1',
    'us-west2',
    'us-west3',
    'us-west4',
  ],
});

/**
 * A location as Google spells it: a multi-region in capitals (`EU`, `US`), a region in lower case
 * (`europe-west1`). Google compares locations without case, the stack's guards compare strings:
 * config is normalised once, here, so `eu` and `EU` are one value, never a fixed-knob change.
 */
export function normalisedLocation(location: string): string {
  const trimmed = location.trim();
  return MULTI_REGION_MEMBERS[trimmed.toUpperCase()] !== undefined
    ? trimmed.toUpperCase()
    : trimmed.toLowerCase();
}

/**
 * Problems of a `region` that does not lie inside `dataLocation`: the worker, the topics' messages
 * (they name documents) and the image would then live outside where the documents are kept.
 */
export function regionProblems(region: string, dataLocation: string): string[] {
  const location = dataLocation.trim();
  const members = MULTI_REGION_MEMBERS[location.toUpperCase()];
  if (members !== undefined) {
    return members.includes(region)
      ? []
      : [
          `region (${region}) is not inside dataLocation (${location}): the worker and the messages that name documents would run outside where the documents are kept. ` +
            `Set docline:region to one of ${members.join(', ')}.`,
        ];
  }
  if (/^[a-z]+-[a-z]+\d+$/.test(location.toLowerCase())) {
    return location.toLowerCase() === region
      ? []
      : [
          `region (${region}) is not inside dataLocation (${location}): with a regional dataLocation the worker runs in that region. Set docline:region to ${location.toLowerCase()}.`,
        ];
  }
  return [
    `dataLocation (${location}) must be ${Object.keys(MULTI_REGION_MEMBERS).join(' or ')} or a region such as europe-west1: a dual-region or another multi-region cannot hold the BigQuery dataset docline writes.`,
  ];
}

/** A knob a deployed stack must not change in place: its row of the settings table says why. */
export type FixedKnob = {
  [K in SettingKey]: (typeof SETTINGS)[K] extends { fixedAtDeploy: string } ? K : never;
}[SettingKey];

/**
 * The {@link FixedKnob}s and why each is fixed. The stack exports their deployed values
 * (`deployedSettings`) and compares them with its configuration on every later run.
 */
export const FIXED_AT_DEPLOY = Object.freeze(
  Object.fromEntries(
    Object.entries(SETTINGS as Record<string, SettingDeclaration>).flatMap(([key, s]) =>
      s.fixedAtDeploy === undefined ? [] : [[key, s.fixedAtDeploy]],
    ),
  ),
) as Readonly<Record<FixedKnob, string>>;

/** The values of the {@link FIXED_AT_DEPLOY} knobs, as the stack exports them. */
export type FixedSettings = Readonly<Record<FixedKnob, string>>;

/**
 * The labels the memo bucket carries with the deployed values of the {@link FIXED_AT_DEPLOY} knobs.
 * The stack's outputs are written only by an `up` that completes: after a first `up` that failed
 * midway (a quota, a refused grant) the next run finds no `deployedSettings`, while the bucket, the
 * dataset and the topics already exist. The memo bucket has a name known in advance and is among the
 * first resources created, so its labels are what the cloud says the stack was deployed with.
 */
export const FIXED_SETTING_LABELS: Readonly<Record<FixedKnob, string>> = Object.freeze({
  dedupKeyMode: 'docline-dedup-key-mode',
  region: 'docline-region',
  dataLocation: 'docline-data-location',
});

/** The labels of {@link FIXED_SETTING_LABELS} for these values (label values are lower case). */
export function fixedSettingLabels(settings: FixedSettings): Record<string, string> {
  const labels: Record<string, string> = {};
  for (const knob of Object.keys(FIXED_SETTING_LABELS) as FixedKnob[]) {
    labels[FIXED_SETTING_LABELS[knob]] = settings[knob].toLowerCase();
  }
  return labels;
}

/**
 * What the cloud says the stack was deployed with, read from the memo bucket's labels: the fallback
 * of the fixed-knob guards when the stack has no `deployedSettings` output yet. A bucket that does
 * not exist (a new stack), an API not yet enabled or a read refused all mean "nothing deployed", as
 * does a bucket that carries none of the labels.
 */
export async function readFixedSettingsFromCloud(
  memoBucketName: string,
): Promise<Partial<FixedSettings> | undefined> {
  let labels: Readonly<Record<string, string>> | undefined;
  try {
    labels = (await gcp.storage.getBucket({ name: memoBucketName })).labels;
  } catch {
    return undefined;
  }
  const found: Partial<Record<FixedKnob, string>> = {};
  for (const knob of Object.keys(FIXED_SETTING_LABELS) as FixedKnob[]) {
    const value = labels?.[FIXED_SETTING_LABELS[knob]];
    if (value !== undefined && value !== '')
      found[knob] = knob === 'dedupKeyMode' ? value : normalisedLocation(value);
  }
  return Object.keys(found).length > 0 ? found : undefined;
}

/** The knobs whose change a drained stack may accept once (docline:allowKnobChange). */
export const DRAINABLE_KNOBS: readonly FixedKnob[] = ['dedupKeyMode'];

/**
 * Problems of a configuration that changes a knob fixed at deploy. `deployed` is what the stack's
 * last `up` exported (undefined before the first one); `allow` is docline:allowKnobChange, the one
 * knob an operator declares drained. An allowance for a knob that does not change is a problem too:
 * left in place, it would let a later change through without a drain.
 */
export function knobChangeProblems(
  deployed: Partial<FixedSettings> | undefined,
  current: FixedSettings,
  allow: string | undefined,
): string[] {
  const problems: string[] = [];
  const allowable: readonly string[] = [...DRAINABLE_KNOBS, ...RETENTION_KNOBS];
  if (allow !== undefined && !allowable.includes(allow)) {
    problems.push(
      `allowKnobChange (${allow}) can only name ${allowable.join(', ')}: the other knobs fixed at deploy need a new stack (docs/deploy.md, "Knobs fixed at deploy").`,
    );
  }
  if (deployed === undefined) return problems;
  for (const knob of Object.keys(FIXED_AT_DEPLOY) as FixedKnob[]) {
    const deployedValue = deployed[knob];
    // Deployed before config was normalised: `eu` then is the `EU` it is now.
    const before =
      deployedValue !== undefined && knob !== 'dedupKeyMode'
        ? normalisedLocation(deployedValue)
        : deployedValue;
    if (before === undefined || before === current[knob]) {
      if (allow === knob) {
        problems.push(
          `allowKnobChange names ${knob}, which does not change (${current[knob]}): remove it (\`pulumi config rm docline:allowKnobChange\`), so that no later change of ${knob} skips the drain.`,
        );
      }
      continue;
    }
    if (allow === knob) continue;
    const drain =
      knob === 'dedupKeyMode'
        ? 'To change it, drain first (docs/deploy.md, "Knobs fixed at deploy": no backlog, no dead letters, reconcile run), then `pulumi config set docline:allowKnobChange dedupKeyMode` for that one `up`.'
        : 'It cannot change in place: create a new stack with the new value and move the uploads to it (docs/deploy.md, "Knobs fixed at deploy").';
    problems.push(
      `${knob} is deployed as ${before} and now set to ${current[knob]}: ${FIXED_AT_DEPLOY[knob]}. ` +
        `Set it back with \`pulumi config set docline:${knob} ${before}\`. ${drain}`,
    );
  }
  return problems;
}

/**
 * The retentions a running stack may raise but not lower without saying so: Pub/Sub applies a
 * shorter retention to the messages already held, so lowering `messageRetentionSeconds` drops every
 * undelivered upload older than the new value at once, and lowering `deadLetterRetentionSeconds`
 * drops the dead letters older than it, documents that were never recorded either way.
 */
export const RETENTION_KNOBS = ['messageRetentionSeconds', 'deadLetterRetentionSeconds'] as const;

/** The values of the {@link RETENTION_KNOBS}, as the stack exports them (`deployedRetention`). */
export type RetentionSettings = Readonly<Record<(typeof RETENTION_KNOBS)[number], number>>;

/**
 * Problems of a configuration that lowers a retention below the deployed one. Accepted once with
 * docline:allowKnobChange naming it, after checking that nothing older than the new value is held
 * (the subscription's `oldest_unacked_message_age`, the dead letters' age); an allowance for a
 * retention that does not go down is a problem too, as for the fixed knobs.
 */
export function retentionDecreaseProblems(
  deployed: Partial<RetentionSettings> | undefined,
  current: RetentionSettings,
  allow: string | undefined,
): string[] {
  const problems: string[] = [];
  for (const knob of RETENTION_KNOBS) {
    const before = deployed?.[knob];
    const lowered = typeof before === 'number' && current[knob] < before;
    if (!lowered) {
      if (allow === knob && deployed !== undefined) {
        problems.push(
          `allowKnobChange names ${knob}, which does not go down (${current[knob]} s): remove it (\`pulumi config rm docline:allowKnobChange\`), so that no later decrease skips the check.`,
        );
      }
      continue;
    }
    if (allow === knob) continue;
    const held =
      knob === 'messageRetentionSeconds'
        ? 'the push subscription drops every undelivered upload older than that at once'
        : 'the dead-letter subscription and topic drop every dead letter older than that at once';
    problems.push(
      `${knob} is deployed as ${before} s and now set to ${current[knob]} s: ${held}, documents that were never recorded. ` +
        `Set it back with \`pulumi config set docline:${knob} ${before}\`, or, once nothing older than ${current[knob]} s is held ` +
        `(docs/deploy.md, "Lowering a retention"), \`pulumi config set docline:allowKnobChange ${knob}\` for that one \`up\`.`,
    );
  }
  return problems;
}

/** The documents' retention as the stack exports it (`documentRetention`). */
export interface DocumentRetention {
  readonly years: number;
  readonly locked: boolean;
}

/**
 * Problems of a configuration that undoes a locked retention policy. Google refuses to remove or
 * shorten a locked policy, and the provider answers a lock the program no longer asks for with a new
 * bucket (docs/deploy.md, "Keeping documents for years").
 */
export function retentionLockProblems(
  deployed: Partial<DocumentRetention> | undefined,
  current: DocumentRetention,
): string[] {
  if (deployed?.locked !== true) return [];
  const problems: string[] = [];
  if (!current.locked) {
    problems.push(
      'documentRetentionLocked is deployed as true and now false: a locked retention policy can never be removed, and the provider would answer with a new, empty documents bucket. ' +
        'Set it back with `pulumi config set docline:documentRetentionLocked true`.',
    );
  }
  if (typeof deployed.years === 'number' && current.years < deployed.years) {
    problems.push(
      `documentRetentionYears is deployed as ${deployed.years} under a locked policy and now set to ${current.years}: a locked period can only grow. ` +
        `Set it back with \`pulumi config set docline:documentRetentionYears ${deployed.years}\`.`,
    );
  }
  return problems;
}

/** What the stack's own last `up` exported, as the guards need it. */
export interface DeployedStack {
  /** `deployedSettings`, undefined before the first `up` (or a stack deployed before it existed). */
  readonly settings: Partial<FixedSettings> | undefined;
  /** The image the stack runs now (`image`), undefined before the first `up`. */
  readonly image: string | undefined;
  /** The table version it writes to (`tableVersion`), undefined before it was exported. */
  readonly tableVersion: number | undefined;
  /** `deployedRetention`, undefined before it was exported. */
  readonly retention: Partial<RetentionSettings> | undefined;
  /** `documentRetention`, undefined before it was exported. */
  readonly documentRetention: Partial<DocumentRetention> | undefined;
}

/** The logical name of the reference the stack reads its own last outputs through. */
export const SELF_REFERENCE_NAME = 'docline-deployed';

/**
 * Reads the stack's own last outputs through a `StackReference` to itself: the engine reads the
 * outputs of the last completed update from the backend (in a preview too), before this run changes
 * anything. The program awaits it before declaring any resource, so a refused change stops the run
 * before the engine has anything to do.
 */
export async function readDeployed(): Promise<DeployedStack> {
  const self = `${pulumi.getOrganization()}/${pulumi.getProject()}/${pulumi.getStack()}`;
  const reference = new pulumi.StackReference(SELF_REFERENCE_NAME, { name: self });
  const [settings, image, tableVersion, retention, documentRetention] = await Promise.all([
    reference.getOutputDetails('deployedSettings'),
    reference.getOutputDetails('image'),
    reference.getOutputDetails('tableVersion'),
    reference.getOutputDetails('deployedRetention'),
    reference.getOutputDetails('documentRetention'),
  ]);
  const value = (details: pulumi.StackReferenceOutputDetails): unknown =>
    details.value ?? details.secretValue;
  const imageValue = value(image);
  const object = <T>(v: unknown): T | undefined =>
    v !== null && typeof v === 'object' ? (v as T) : undefined;
  return {
    settings: object<Partial<FixedSettings>>(value(settings)),
    image: typeof imageValue === 'string' && imageValue !== '' ? imageValue : undefined,
    tableVersion: typeof value(tableVersion) === 'number' ? (value(tableVersion) as number) : undefined,
    retention: object<Partial<RetentionSettings>>(value(retention)),
    documentRetention: object<Partial<DocumentRetention>>(value(documentRetention)),
  };
}

/**
 * Problems of a table version below the deployed one. The older version's table was left in
 * BigQuery when the stack moved on: going back would try to create it again (409 "already exists")
 * and would leave behind the rows written since.
 */
export function tableVersionProblems(deployed: number | undefined, current: number): string[] {
  if (deployed === undefined || current >= deployed) return [];
  return [
    `tableVersion is deployed as ${deployed} and now set to ${current}: version ${current}'s table was left in BigQuery when the stack moved on, and the rows written since are in version ${deployed}'s. ` +
      `Set it back with \`pulumi config set docline:tableVersion ${deployed}\`; to change the schema again, go forward to ${deployed + 1} (docs/deploy.md, "A schema change BigQuery cannot apply in place").`,
  ];
}

/**
 * The image of a stack that runs only promoted images (docline:promotedImage): the one the
 * configuration names, else the one it runs now; never a build. A problem when there is neither:
 * the first `up` of such a stack needs the digest CI promoted.
 */
export function promotedImageProblems(
  image: string | undefined,
  deployedImage: string | undefined,
): string[] {
  if (image !== undefined || deployedImage !== undefined) return [];
  return [
    'promotedImage is true but no image is set and none is deployed yet: this stack runs only the digest CI built and promoted. ' +
      'Run the deploy workflow, or set `pulumi config set docline:image REGION-docker.pkg.dev/PROJECT/REPO/worker@sha256:DIGEST`.',
  ];
}
