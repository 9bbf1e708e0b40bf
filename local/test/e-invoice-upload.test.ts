import { DEFAULT_CONTENT_TYPES } from '../../worker/src/contract/settings';
import { contentTypeFor } from '../lib/announcer';

describe('e-invoices in the local pipeline', () => {
  it('uploads .xml files as application/xml, a content type the worker takes by default', () => {
    expect(contentTypeFor('inbox/EN16931_Einfach.ubl.xml')).toBe('application/xml');
    expect(contentTypeFor('FACTURE.XML')).toBe('application/xml');
    expect(DEFAULT_CONTENT_TYPES).toEqual(expect.arrayContaining(['application/xml', 'text/xml']));
  });
});
