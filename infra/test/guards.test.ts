/**
 * No routine change loses or doubles a document: what the stack refuses, protects and keeps, read
 * from what the engine receives under Pulumi's mocks, on the stack files. A `StackReference` to the
 * stack itself is a read the mocks answer, so "the last `up` exported X" is a test input.
 */
import { firstComponentNames } from '../components/component';
import { Delivery } from '../components/delivery';
import { DocumentBucket, documentRetention } from '../components/document-bucket';
import { RegionalLogs } from '../components/regional-logs';
import { TABLE_ID, Warehouse } from '../components/warehouse';
import { parseStackConfig, StackConfigError } from '../config';
import {
  knobChangeProblems,
  normalisedLocation,
  regionProblems,
  retentionDecreaseProblems,
} from '../stack-guards';
import {
  failure,
  MOCK_DEPLOYED_IMAGE,
  MOCK_PROJECT_NUMBER,
  ofType,
  one,
  type ProgramRun,
  REGISTERED_BEFORE_FAILURE,
  runStack,
  stackConfig,
  T,
  waitsFor,
} from './harness';

const DEPLOYED = { dedupKeyMode: 'object', region: 'europe-west1', dataLocation: 'EU' };
/** The outputs of a stack deployed with DEPLOYED. */
const DEPLOYED_STACK = { deployedSettings: DEPLOYED, image: MOCK_DEPLOYED_IMAGE };
/** A run of the prod stack file with `overrides`, on a stack whose last `up` exported DEPLOYED_STACK. */
const runDeployed = (overrides: Record<string, string> = {}) =>
  runStack('prod', overrides, { deployed: DEPLOYED_STACK });

describe('data-bearing resources', () => {
  it('keep the uploads on the topic as long as the subscription does, so a replacement can be seeked back', async () => {
    const run = await runStack('prod', { 'docline:messageRetentionSeconds': '86400' });
    expect(one(run, T.topic, '-uploads').inputs.messageRetentionDuration).toBe('86400s');
    expect(one(run, T.subscription, '-push').inputs.messageRetentionDuration).toBe('86400s');
  });
});

describe('the data-bearing resources and the notification across a rename of their component (or of the prefix)', () => {
  const project = 'docline-dev-example';
  /** One component alone under another name, as a refactor would leave it, with or without its stable name. */
  const programs: Record<string, (stable: boolean) => () => Promise<Record<string, unknown>>> = {
    notification: (stable) => async () => {
      new Delivery('docline-dev-pipeline', {
        project,
        region: 'europe-west1',
        keepData: false,
        topic: `projects/${project}/topics/uploads`,
        bucketName: 'bucket',
        notificationNeeds: [],
        pushNeeds: [],
        pushEndpoint: 'https://worker/push',
        audience: 'https://docline-dev.docline.invalid/push',
        pushServiceAccountEmail: `push@${project}.iam.gserviceaccount.com`,
        pushServiceAccountName: `projects/${project}/serviceAccounts/push@${project}.iam.gserviceaccount.com`,
        ...(stable ? { stableName: firstComponentNames('dev').delivery } : {}),
        settings: {
          ackDeadlineSeconds: 510,
          minRetryBackoffSeconds: 10,
          maxRetryBackoffSeconds: 600,
          maxDeliveryAttempts: 10,
          messageRetentionSeconds: 604800,
          deadLetterRetentionSeconds: 604800,
        },
      });
      return {};
    },
    'documents bucket': (stable) => async () => {
      new DocumentBucket('dl-dev-uploads', {
        project,
        location: 'EU',
        region: 'europe-west1',
        forceDestroy: true,
        keepData: false,
        messageRetentionSeconds: 604800,
        ...(stable ? { stableName: firstComponentNames('dev').documents } : {}),
      });
      return {};
    },
    'dataset and table': (stable) => async () => {
      new Warehouse('dl-dev-rows', {
        project,
        location: 'EU',
        datasetId: 'docline_dev',
        deletionProtection: false,
        ...(stable ? { stableName: firstComponentNames('dev').warehouse } : {}),
      });
      return {};
    },
    'log bucket': (stable) => async () => {
      new RegionalLogs('dl-dev-lines', {
        project,
        prefix: 'docline-dev',
        region: 'europe-west1',
        keepData: false,
        sources: ['resource.type = "cloud_run_revision"'],
        ...(stable ? { stableName: firstComponentNames('dev').logs } : {}),
      });
      return {};
    },
  };
  const kept = (run: ProgramRun) =>
    run.resources.filter(
      (r) =>
        (r.type === T.bucket && !r.name.includes('memo')) ||
        r.type === T.dataset ||
        (r.type === T.table && r.inputs.view === undefined) ||
        r.type === T.logBucket ||
        r.type === T.notification,
    );

  it.each(Object.keys(programs))(
    '%s: the renamed resource aliases the URN the stack deployed',
    async (part) => {
      // A resource is its type and its name's last part (the table and the corrections table share a type).
      const id = (r: { type: string; name: string }) => `${r.type} ${r.name.split('-').pop()}`;
      const deployed = new Map(kept(await runStack('dev')).map((r) => [id(r), r]));
      const after = kept(await runStack('dev', {}, { program: programs[part]!(true) }));
      expect(after.length).toBeGreaterThan(0);
      for (const r of after) {
        const before = deployed.get(id(r));
        expect(before).toBeDefined();
        expect(r.urn).not.toBe(before?.urn);
        // The engine resolves the alias to the deployed resource: no new bucket, no forceDestroy of the old.
        expect([r.name, r.options.aliases]).toEqual([r.name, [before?.urn]]);
        // Still replaced as before (the notification delete-first) if a field changes.
        expect([r.name, r.options.deleteBeforeReplace]).toEqual([
          r.name,
          before?.options.deleteBeforeReplace,
        ]);
      }
    },
  );

  it.each(Object.keys(programs))(
    '%s: without the stable name it would be a new resource (what the alias prevents)',
    async (part) => {
      const after = kept(await runStack('dev', {}, { program: programs[part]!(false) }));
      for (const r of after) expect(r.options.aliases).toEqual([]);
    },
  );

  it('are spelled from the stack name, never from the prefix, and need no alias while the names hold', async () => {
    expect(firstComponentNames('prod')).toEqual({
      documents: 'docline-prod-documents',
      warehouse: 'docline-prod-warehouse',
      logs: 'docline-prod-logs',
      delivery: 'docline-prod-delivery',
    });
    const run = await runStack('dev');
    expect(kept(run).filter((r) => r.options.aliases.length > 0)).toEqual([]);
  });
});

describe('knobs fixed at deploy', () => {
  it.each([
    [
      'dedupKeyMode',
      { 'docline:dedupKeyMode': 'message' },
      /dedupKeyMode is deployed as object and now set to message/,
    ],
    [
      'region',
      { 'docline:region': 'europe-west4' },
      /region is deployed as europe-west1 and now set to europe-west4: .*cannot change in place: create a new stack/,
    ],
    [
      'dataLocation',
      { 'docline:dataLocation': 'europe-west1' },
      /dataLocation is deployed as EU and now set to europe-west1: the bucket and the dataset cannot move/,
    ],
  ])(
    'refuses an in-place change of %s, before declaring anything, naming the knob and the way out',
    async (_knob, change, message) => {
      const error = await failure(runDeployed(change));

      expect(error).toBeInstanceOf(StackConfigError);
      expect(error.message).toMatch(message);
      expect(error.message).toMatch(/Set it back with `pulumi config set docline:/);
      expect(error[REGISTERED_BEFORE_FAILURE]).toEqual([]);
    },
  );

  it('names the drain for dedupKeyMode, and accepts the change once allowKnobChange declares it drained', async () => {
    const change = { 'docline:dedupKeyMode': 'message' };
    const refused = await failure(runDeployed(change));
    expect(refused.message).toMatch(/drain first .*no backlog, no dead letters, reconcile run/);
    expect(refused.message).toMatch(/docline:allowKnobChange dedupKeyMode/);

    const run = await runDeployed({ ...change, 'docline:allowKnobChange': 'dedupKeyMode' });
    expect(run.outputs.deployedSettings).toEqual({ ...DEPLOYED, dedupKeyMode: 'message' });
  });

  it('refuses an allowance left in place after the change, so no later change skips the drain', async () => {
    const error = await failure(runDeployed({ 'docline:allowKnobChange': 'dedupKeyMode' }));
    expect(error.message).toMatch(
      /allowKnobChange names dedupKeyMode, which does not change \(object\): remove it/,
    );
    expect(knobChangeProblems(DEPLOYED, { ...DEPLOYED, region: 'europe-west4' }, 'region')[0]).toMatch(
      /allowKnobChange \(region\) can only name dedupKeyMode/,
    );
  });

  it('accepts the same values, a first deploy, and a stack deployed before the settings were exported', async () => {
    const same = await runDeployed();
    expect(same.outputs.deployedSettings).toEqual(DEPLOYED);
    const first = await runStack('dev', { 'docline:dedupKeyMode': 'message' }, { deployed: {} });
    expect(first.outputs.deployedSettings).toEqual({ ...DEPLOYED, dedupKeyMode: 'message' });
    expect(knobChangeProblems(undefined, { ...DEPLOYED, region: 'us-east1' }, undefined)).toEqual([]);
  });
});

describe('knobs fixed at deploy, after a first up that wrote no outputs', () => {
  const image = `europe-west1-docker.pkg.dev/docline-prod-example/docline-images/worker@sha256:${'e'.repeat(64)}`;
  const memo = 'docline-prod-memo-docline-prod-example';
  const labelled = {
    [memo]: {
      location: 'EU',
      labels: {
        'docline-role': 'memo',
        'docline-dedup-key-mode': 'object',
        'docline-region': 'europe-west1',
        'docline-data-location': 'eu',
      },
    },
  };

  it('records the deployed values on the memo bucket, one of the first resources created', async () => {
    const run = await runStack('prod', { 'docline:image': image }, { deployed: {} });
    expect(one(run, T.bucket, '-memo-bucket').inputs.labels).toEqual(labelled[memo].labels);
  });

  it.each([
    [
      'dataLocation',
      { 'docline:dataLocation': 'europe-west1' },
      /dataLocation is deployed as EU and now set to europe-west1/,
    ],
    [
      'dedupKeyMode',
      { 'docline:dedupKeyMode': 'message' },
      /dedupKeyMode is deployed as object and now set to message/,
    ],
  ])(
    'refuses a change of %s read from those labels when the stack has no outputs yet',
    async (_knob, change, message) => {
      const error = await failure(
        runStack('prod', { 'docline:image': image, ...change }, { deployed: {}, buckets: labelled }),
      );
      expect(error.message).toMatch(message);
      expect(error[REGISTERED_BEFORE_FAILURE]).toEqual([]);
    },
  );

  it('takes a stack whose memo bucket does not exist as never deployed', async () => {
    const run = await runStack(
      'prod',
      { 'docline:image': image, 'docline:dedupKeyMode': 'message' },
      { deployed: {} },
    );
    expect(run.outputs.deployedSettings).toEqual({ ...DEPLOYED, dedupKeyMode: 'message' });
  });
});

describe('retentions lowered on a running stack', () => {
  const RETAINED = { messageRetentionSeconds: 604800, deadLetterRetentionSeconds: 604800 };
  const deployed = { ...DEPLOYED_STACK, deployedRetention: RETAINED };

  it.each([
    ['messageRetentionSeconds', '86400', /push subscription drops every undelivered upload older than that/],
    ['deadLetterRetentionSeconds', '604800', /drop every dead letter older than that/],
  ])(
    'refuses a lower %s before declaring anything, naming the way back and the allowance',
    async (knob, lower, why) => {
      const error = await failure(
        runStack(
          'prod',
          { [`docline:${knob}`]: lower },
          { deployed: { ...deployed, deployedRetention: { ...RETAINED, [knob]: 691200 } } },
        ),
      );
      expect(error).toBeInstanceOf(StackConfigError);
      expect(error.message).toMatch(new RegExp(`${knob} is deployed as 691200 s and now set to ${lower} s`));
      expect(error.message).toMatch(why);
      expect(error.message).toMatch(new RegExp(`docline:allowKnobChange ${knob}`));
      expect(error[REGISTERED_BEFORE_FAILURE]).toEqual([]);
    },
  );

  it('accepts a raise, the same value, a first deploy, and a decrease declared once with allowKnobChange', async () => {
    const raised = await runStack('prod', { 'docline:messageRetentionSeconds': '691200' }, { deployed });
    expect(raised.outputs.deployedRetention).toEqual({ ...RETAINED, messageRetentionSeconds: 691200 });
    expect(
      retentionDecreaseProblems(undefined, { ...RETAINED, messageRetentionSeconds: 600 }, undefined),
    ).toEqual([]);
    const allowed = await runStack(
      'prod',
      {
        'docline:messageRetentionSeconds': '86400',
        'docline:allowKnobChange': 'messageRetentionSeconds',
      },
      { deployed },
    );
    expect(allowed.outputs.deployedRetention).toEqual({ ...RETAINED, messageRetentionSeconds: 86400 });
  });

  it('refuses an allowance left in place after the decrease', () => {
    expect(retentionDecreaseProblems(RETAINED, RETAINED, 'deadLetterRetentionSeconds')[0]).toMatch(
      /allowKnobChange names deadLetterRetentionSeconds, which does not go down/,
    );
  });
});

describe('locations as Google spells them', () => {
  it.each([
    ['eu', 'EU'],
    [' Us ', 'US'],
    ['Europe-West4', 'europe-west4'],
  ])('normalises %j to %j', (typed, stored) => {
    expect(normalisedLocation(typed)).toBe(stored);
  });

  it('accepts `eu` on a stack deployed with `EU`, and stores it as EU (no fixed-knob change)', async () => {
    const run = await runDeployed({ 'docline:dataLocation': 'eu', 'docline:region': 'Europe-West1' });
    expect(run.outputs.deployedSettings).toEqual(DEPLOYED);
    expect(one(run, T.bucket, '-documents-bucket').inputs.location).toBe('EU');
  });

  it('accepts `EU` on a stack that deployed `eu` before config was normalised', () => {
    expect(knobChangeProblems({ ...DEPLOYED, dataLocation: 'eu' }, DEPLOYED, undefined)).toEqual([]);
  });
});

describe('region inside dataLocation', () => {
  it.each([
    ['europe-west2', 'EU'],
    ['europe-west6', 'EU'],
    ['us-central1', 'EU'],
    ['northamerica-northeast1', 'US'],
    ['europe-west1', 'europe-west4'],
  ])('refuses region %s with dataLocation %s, saying which regions fit', (region, dataLocation) => {
    expect(() => parseStackConfig('p', 'dev', { region, dataLocation })).toThrow(
      new RegExp(
        `region \\(${region}\\) is not inside dataLocation \\(${dataLocation}\\).*Set docline:region to`,
      ),
    );
  });

  it.each([
    ['europe-west9', 'EU'],
    ['us-east4', 'US'],
    ['europe-west4', 'europe-west4'],
    ['europe-west4', 'EUROPE-WEST4'],
  ])('accepts region %s with dataLocation %s', (region, dataLocation) => {
    expect(regionProblems(region, dataLocation)).toEqual([]);
  });

  it('refuses a location the dataset cannot have', () => {
    expect(regionProblems('europe-west1', 'EUR4')[0]).toMatch(
      /dataLocation \(EUR4\) must be EU or US or a region/,
    );
  });

  it('stops the program on the prod stack file with the region outside the location', async () => {
    const error = await failure(runStack('prod', { 'docline:region': 'europe-west2' }));
    expect(error.message).toMatch(/region \(europe-west2\) is not inside dataLocation \(EU\)/);
  });
});

describe('a schema change BigQuery cannot apply in place (tableVersion)', () => {
  it('creates the next version beside the old one: a new URN and table id, never a replacement', async () => {
    const v1 = await runDeployed();
    const v2 = await runDeployed({ 'docline:tableVersion': '2' });
    const tableOf = (run: ProgramRun) =>
      ofType(run, T.table).filter((t) => t.inputs.view === undefined && t.inputs.tableId !== 'corrections');
    const [old] = tableOf(v1);
    const [next] = tableOf(v2);

    expect(tableOf(v2)).toHaveLength(1);
    expect(old!.inputs.tableId).toBe(TABLE_ID);
    expect(next!.inputs.tableId).toBe(`${TABLE_ID}_v2`);
    expect(next!.urn).not.toBe(old!.urn);
    // The old table leaves the program: the engine would delete it, and protect stops that in prod.
    expect(v2.resources.map((r) => r.urn)).not.toContain(old!.urn);
    expect(old!.options).toMatchObject({ protect: true, retainOnDelete: true });
    expect(next!.options).toMatchObject({ protect: true, retainOnDelete: true });
    // Everything that reads or writes the table follows it: the worker, the views, the output.
    const env = (
      one(v2, T.run).inputs.template as { containers: { envs: { name: string; value?: string }[] }[] }
    ).containers[0]!.envs;
    expect(env.find((e) => e.name === 'BIGQUERY_TABLE')?.value).toBe(
      `docline-prod-example.docline_prod.${TABLE_ID}_v2`,
    );
    for (const view of ofType(v2, T.table).filter((t) => t.inputs.view !== undefined)) {
      expect((view.inputs.view as { query: string }).query).toContain(`.${TABLE_ID}_v2`);
      expect((view.inputs.view as { query: string }).query).not.toMatch(new RegExp(`\\.${TABLE_ID}[^_]`));
    }
    expect(v2.outputs.tableId).toBe(`docline-prod-example.docline_prod.${TABLE_ID}_v2`);
  });

  it('refuses going back to a version the stack moved on from, and accepts staying or going forward', async () => {
    const deployed = { ...DEPLOYED_STACK, tableVersion: 2 };
    const back = await failure(runStack('prod', {}, { deployed }));
    expect(back.message).toMatch(/tableVersion is deployed as 2 and now set to 1: .*go forward to 3/);
    expect(back[REGISTERED_BEFORE_FAILURE]).toEqual([]);
    const same = await runStack('prod', { 'docline:tableVersion': '2' }, { deployed });
    expect(same.outputs.tableVersion).toBe(2);
    const forward = await runStack('prod', { 'docline:tableVersion': '3' }, { deployed });
    expect(forward.outputs.tableVersion).toBe(3);
  });

  it('refuses a version below 1', () => {
    expect(() => parseStackConfig('p', 'dev', { tableVersion: '0' })).toThrow(
      /tableVersion must be a whole number from 1/,
    );
  });
});

describe('the image of a promoted-image stack (prod)', () => {
  it('is what Pulumi.prod.yaml asks for, with no image of its own (no placeholder digest)', () => {
    const prod = stackConfig('prod');
    expect(prod['docline:promotedImage']).toBe('true');
    expect(prod['docline:image']).toBeUndefined();
    expect(JSON.stringify(prod)).not.toMatch(/sha256:/);
  });

  it('keeps the image it runs when no digest is given: no build, no repository, no placeholder', async () => {
    const run = await runDeployed();
    expect(ofType(run, T.image)).toEqual([]);
    expect(ofType(run, T.repository)).toEqual([]);
    expect(run.outputs.image).toBe(MOCK_DEPLOYED_IMAGE);
  });

  it('runs the digest CI promoted when it is given', async () => {
    const promoted = `europe-west1-docker.pkg.dev/ci/docline-images/worker@sha256:${'e'.repeat(64)}`;
    const run = await runDeployed({ 'docline:image': promoted });
    expect(run.outputs.image).toBe(promoted);
  });

  it('lets Cloud Run’s service agent read a promoted image of another project, before the service', async () => {
    const promoted = `europe-west1-docker.pkg.dev/ci/docline-images/worker@sha256:${'e'.repeat(64)}`;
    const run = await runDeployed({ 'docline:image': promoted });
    const grant = one(run, T.repositoryIam);
    expect(grant.inputs).toEqual({
      project: 'ci',
      location: 'europe-west1',
      repository: 'docline-images',
      role: 'roles/artifactregistry.reader',
      member: `serviceAccount:service-${MOCK_PROJECT_NUMBER}@serverless-robot-prod.iam.gserviceaccount.com`,
    });
    // The agent exists once the Run API is on; the first revision pulls only after the grant settled.
    expect(
      waitsFor(run, grant).has(
        ofType(run, T.api).find((a) => a.inputs.service === 'run.googleapis.com')!.urn,
      ),
    ).toBe(true);
    expect(waitsFor(run, one(run, T.run)).has(grant.urn)).toBe(true);
    const settle = one(run, T.sleep, '-worker-grants-settle');
    expect(waitsFor(run, settle).has(grant.urn)).toBe(true);
  });

  it('grants nothing for an image of the stack’s own project', async () => {
    const own = `europe-west1-docker.pkg.dev/docline-prod-example/docline-images/worker@sha256:${'e'.repeat(64)}`;
    const run = await runDeployed({ 'docline:image': own });
    expect(ofType(run, T.repositoryIam)).toEqual([]);
  });

  it('refuses a first deploy without a promoted digest, saying how to get one', async () => {
    const error = await failure(runStack('prod', {}, { deployed: {} }));
    expect(error.message).toMatch(
      /promotedImage is true but no image is set and none is deployed yet.*deploy workflow/,
    );
  });
});

describe('document retention (documentRetentionYears)', () => {
  it('is off by default', async () => {
    const run = await runStack('prod');
    expect(one(run, T.bucket, '-documents-bucket').inputs.retentionPolicy).toBeUndefined();
  });

  it('holds every document for whole calendar years, unlocked unless the stack says so', async () => {
    const run = await runStack('prod', { 'docline:documentRetentionYears': '10' });
    // 10 years with their leap days: 3,653 days.
    expect(one(run, T.bucket, '-documents-bucket').inputs.retentionPolicy).toEqual({
      retentionPeriod: String(3653 * 86400),
      isLocked: false,
    });
    expect(one(run, T.bucket, '-memo-bucket').inputs.retentionPolicy).toBeUndefined();
    expect(documentRetention(0)).toBeUndefined();
  });

  it('locks the policy in the program, so the provider never meets a lock it does not know', async () => {
    // A lock made by hand: the next refresh reads is_locked true, the program says false, and the
    // provider forces a new bucket (ForceNewIfChange on retention_policy.0.is_locked).
    const run = await runStack('prod', {
      'docline:documentRetentionYears': '10',
      'docline:documentRetentionLocked': 'true',
    });
    expect(one(run, T.bucket, '-documents-bucket').inputs.retentionPolicy).toMatchObject({ isLocked: true });
    expect(run.outputs.documentRetention).toEqual({ years: 10, locked: true });
    expect(() => parseStackConfig('p', 'dev', { documentRetentionLocked: 'true' })).toThrow(
      /documentRetentionLocked needs documentRetentionYears above 0/,
    );
  });

  it('refuses to unlock, or to shorten, a policy it deployed locked', async () => {
    const deployed = { ...DEPLOYED_STACK, documentRetention: { years: 10, locked: true } };
    const unlocked = await failure(
      runStack('prod', { 'docline:documentRetentionYears': '10' }, { deployed }),
    );
    expect(unlocked.message).toMatch(
      /documentRetentionLocked is deployed as true and now false: a locked retention policy can never be removed/,
    );
    expect(unlocked[REGISTERED_BEFORE_FAILURE]).toEqual([]);
    const shorter = await failure(
      runStack(
        'prod',
        {
          'docline:documentRetentionYears': '8',
          'docline:documentRetentionLocked': 'true',
        },
        { deployed },
      ),
    );
    expect(shorter.message).toMatch(
      /documentRetentionYears is deployed as 10 under a locked policy and now set to 8/,
    );
    const longer = await runStack(
      'prod',
      {
        'docline:documentRetentionYears': '12',
        'docline:documentRetentionLocked': 'true',
      },
      { deployed },
    );
    expect(longer.outputs.documentRetention).toEqual({ years: 12, locked: true });
  });

  it('refuses a period Cloud Storage does not take', () => {
    expect(() => parseStackConfig('p', 'dev', { documentRetentionYears: '100' })).toThrow(
      /documentRetentionYears must be a whole number from 0/,
    );
  });
});
