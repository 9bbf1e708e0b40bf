import * as pulumi from '@pulumi/pulumi';
import { childOf } from './options';

/**
 * A docline component. Its children are created with {@link child} or {@link childAfter}, so that
 * every one of them waits for what the component was told to wait for: Pulumi does not pass a
 * component's dependsOn down to its children by itself. The component's own inputs stay out of the
 * engine (each registers the outputs it has).
 */
export class DoclineComponent extends pulumi.ComponentResource {
  /** Options of a child that needs nothing beyond what the component waits for. */
  protected readonly child: pulumi.CustomResourceOptions;
  readonly #opts: pulumi.ComponentResourceOptions | undefined;

  /**
   * `type` is the component's type token (`docline:index:…`). It is part of every child's URN, so
   * changing it would make a deployed stack replace everything the component holds.
   */
  constructor(type: string, name: string, opts?: pulumi.ComponentResourceOptions) {
    super(type, name, {}, opts);
    this.#opts = opts;
    this.child = childOf(this, opts);
  }

  /** Options of a child that must also wait for `needs`, so that the engine sees the order. */
  protected childAfter(...needs: pulumi.Input<pulumi.Resource>[]): pulumi.CustomResourceOptions {
    return childOf(this, this.#opts, ...needs);
  }
}

/** Arguments every docline component with resources of its own takes. */
export interface ProjectArgs {
  /** The stack's project: the component's resources go there. */
  project: pulumi.Input<string>;
}

/** Arguments of a component that keeps invoice data (a bucket, a dataset). */
export interface DataArgs extends ProjectArgs {
  /**
   * Where the data is kept: the stack's dataLocation, a multi-region such as EU or a region (for
   * BigQuery also the worker's BIGQUERY_LOCATION). Whatever is derived from an invoice stays where
   * the invoice is.
   */
  location: pulumi.Input<string>;
}
